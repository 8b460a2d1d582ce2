//! Redis replies as the REST protocol carries them (RESP mapped to JSON, strings base64), and their checked
//! decoding: a reply not of the promised shape is [`Error::MalformedReply`], never a panic.

use crate::error::{Error, Result};

/// One decoded Redis reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// Redis nil (also what a Lua `false` becomes).
    Nil,
    /// A Redis integer (also what a Lua `true` becomes: 1).
    Int(i64),
    /// A bulk or simple string, as bytes: script members may be binary (Redisson packs them with `struct.pack`).
    Bytes(Vec<u8>),
    /// A multi-bulk reply.
    Array(Vec<Value>),
}

impl Value {
    /// The reply as an integer.
    pub fn into_int(self) -> Result<i64> {
        match self {
            Value::Int(n) => Ok(n),
            other => Err(Error::malformed("an integer", other)),
        }
    }

    /// The reply as a non-negative integer: every count, time and wait a script returns.
    pub fn into_u64(self) -> Result<u64> {
        let n = self.into_int()?;
        u64::try_from(n).map_err(|_| Error::malformed("a non-negative integer", n))
    }

    /// A string reply holding a number of type `T`, as Redis stores numbers in hashes (`what` names it in the error).
    pub fn into_number<T: std::str::FromStr>(self, what: &str) -> Result<T> {
        let text = self.into_string()?;
        text.parse()
            .map_err(|_| Error::malformed(format!("a whole number ({}) for {what}", std::any::type_name::<T>()), text))
    }

    /// The reply as a UTF-8 string.
    pub fn into_string(self) -> Result<String> {
        match self {
            Value::Bytes(bytes) => {
                String::from_utf8(bytes).map_err(|e| Error::malformed("a UTF-8 string", Value::Bytes(e.into_bytes())))
            }
            other => Err(Error::malformed("a string", other)),
        }
    }

    /// The reply as raw bytes.
    pub fn into_bytes(self) -> Result<Vec<u8>> {
        match self {
            Value::Bytes(bytes) => Ok(bytes),
            other => Err(Error::malformed("a string", other)),
        }
    }

    /// The reply as an array.
    pub fn into_array(self) -> Result<Vec<Value>> {
        match self {
            Value::Array(items) => Ok(items),
            other => Err(Error::malformed("an array", other)),
        }
    }

    /// The reply as an array of exactly `N` items: the shape every script decision has.
    pub fn into_tuple<const N: usize>(self) -> Result<[Value; N]> {
        let items = self.into_array()?;
        let len = items.len();
        <[Value; N]>::try_from(items).map_err(|items| {
            Error::malformed(format!("an array of {N} items"), format!("{len} items: {}", Value::Array(items)))
        })
    }

    /// `None` for nil, otherwise the reply itself.
    pub fn into_option(self) -> Option<Value> {
        match self {
            Value::Nil => None,
            other => Some(other),
        }
    }
}

/// A compact, Redis-CLI-like rendering, used in error messages.
impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Nil => f.write_str("(nil)"),
            Value::Int(n) => write!(f, "(integer) {n}"),
            Value::Bytes(bytes) => write!(f, "{:?}", String::from_utf8_lossy(bytes)),
            Value::Array(items) => {
                let items: Vec<String> = items.iter().map(Value::to_string).collect();
                write!(f, "[{}]", items.join(", "))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_checked_for_sign_type_and_range() {
        assert_eq!(Value::Int(7).into_u64().unwrap(), 7);
        assert!(Value::Int(-1).into_u64().is_err());
        assert!(Value::Bytes(b"7".to_vec()).into_u64().is_err());
        assert_eq!(Value::Bytes(b"4294967295".to_vec()).into_number::<u32>("a rate").unwrap(), u32::MAX);
        let too_large = Value::Bytes(b"4294967296".to_vec()).into_number::<u32>("a rate").unwrap_err();
        assert_eq!(too_large.code(), "EDGELIMIT_MALFORMED_REPLY");
        assert!(too_large.to_string().contains("for a rate"), "{too_large}");
        assert!(Value::Bytes(b"ten".to_vec()).into_number::<u64>("an interval").is_err());
        assert!(Value::Int(10).into_number::<u64>("an interval").is_err());
    }

    #[test]
    fn typed_accessors_check_instead_of_assuming() {
        assert_eq!(Value::Int(3).into_int().unwrap(), 3);
        assert!(Value::Nil.into_int().is_err());
        assert!(Value::Bytes(vec![0xff]).into_string().is_err());
        assert!(Value::Array(vec![Value::Int(1)]).into_tuple::<2>().is_err());
        let [a, b] = Value::Array(vec![Value::Int(1), Value::Nil]).into_tuple::<2>().unwrap();
        assert_eq!((a, b.into_option()), (Value::Int(1), None));
    }
}
