//! The JSON of the REST protocol, read and written by hand instead of with serde_json.
//!
//! The protocol needs little of JSON: requests are arrays of strings, replies are `{"result": …}` / `{"error": …}`
//! objects (or an array of them) whose results are null, integers, strings or arrays, and a refused request's problem
//! body is one flat object. Replacing serde_json (with its float parsing and printing, and its object maps) by this
//! reader and writer took 23.7 KB off the Worker's wasm module, 11.1 KB gzipped (README, "Why the wasm is this size");
//! they are about 4 KB of it. The reader still accepts any JSON text, so that a reply of an unexpected shape is
//! reported as such ([`Json`]'s `Display` shows it), and refuses anything that is not JSON; numbers keep their text, so
//! an integer is parsed exactly and nothing else is ever parsed as a float.

use std::fmt::{self, Write as _};

/// How deeply arrays and objects may nest: far deeper than any reply edgelimit reads, and shallow enough that a
/// hostile body cannot exhaust the stack (serde_json's limit too).
const MAX_DEPTH: usize = 128;

/// One JSON value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Json {
    Null,
    Bool(bool),
    /// A number as written (checked against JSON's grammar): only ever parsed as an integer, by whoever needs one.
    Number(String),
    String(String),
    Array(Vec<Json>),
    /// Members in the order written.
    Object(Vec<(String, Json)>),
}

impl Json {
    /// Parses one JSON text (surrounding whitespace allowed); `None` if it is not exactly one JSON value.
    pub(crate) fn parse(text: &str) -> Option<Json> {
        let mut reader = Reader {
            bytes: text.as_bytes(),
            at: 0,
        };
        let value = reader.value(0)?;
        reader.skip_whitespace();
        (reader.at == reader.bytes.len()).then_some(value)
    }

    /// An object's member `key` (the last one, should the key repeat); `None` for a missing key or a non-object.
    pub(crate) fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(members) => members
                .iter()
                .rev()
                .find(|(name, _)| name == key)
                .map(|(_, value)| value),
            _ => None,
        }
    }

    /// The value as a string, if it is one.
    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(text) => Some(text),
            _ => None,
        }
    }
}

/// Compact JSON, as the value was received (error messages show it).
impl fmt::Display for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Json::Null => f.write_str("null"),
            Json::Bool(b) => write!(f, "{b}"),
            Json::Number(text) => f.write_str(text),
            Json::String(text) => write_string(f, text),
            Json::Array(items) => {
                f.write_char('[')?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_char(',')?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_char(']')
            }
            Json::Object(members) => {
                f.write_char('{')?;
                for (i, (name, value)) in members.iter().enumerate() {
                    if i > 0 {
                        f.write_char(',')?;
                    }
                    write_string(f, name)?;
                    write!(f, ":{value}")?;
                }
                f.write_char('}')
            }
        }
    }
}

/// Writes `text` as a JSON string: quotes, backslashes and control characters escaped, everything else as is (the
/// escapes serde_json writes, so that a body is what it was).
// `dyn`, not generic: one copy of the code serves both a Formatter and a String.
pub(crate) fn write_string(out: &mut dyn fmt::Write, text: &str) -> fmt::Result {
    out.write_char('"')?;
    for c in text.chars() {
        match c {
            '"' => out.write_str("\\\"")?,
            '\\' => out.write_str("\\\\")?,
            '\n' => out.write_str("\\n")?,
            '\r' => out.write_str("\\r")?,
            '\t' => out.write_str("\\t")?,
            '\u{8}' => out.write_str("\\b")?,
            '\u{c}' => out.write_str("\\f")?,
            '\0'..='\x1f' => write!(out, "\\u{:04x}", c as u32)?,
            _ => out.write_char(c)?,
        }
    }
    out.write_char('"')
}

/// Appends `words` to `out` as a JSON array of strings: one command as the protocol sends it.
pub(crate) fn push_string_array(out: &mut String, words: &[String]) {
    out.push('[');
    for (i, word) in words.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        // Writing to a String cannot fail.
        let _ = write_string(out, word);
    }
    out.push(']');
}

/// A recursive-descent reader over the text's bytes; every method returns `None` at the first byte that does not fit.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    /// The next byte after whitespace, consumed.
    fn next_token(&mut self) -> Option<u8> {
        self.skip_whitespace();
        let byte = *self.bytes.get(self.at)?;
        self.at += 1;
        Some(byte)
    }

    fn literal(&mut self, rest: &str, value: Json) -> Option<Json> {
        let end = self.at + rest.len();
        (self.bytes.get(self.at..end)? == rest.as_bytes()).then(|| {
            self.at = end;
            value
        })
    }

    fn value(&mut self, depth: usize) -> Option<Json> {
        match self.next_token()? {
            b'n' => self.literal("ull", Json::Null),
            b't' => self.literal("rue", Json::Bool(true)),
            b'f' => self.literal("alse", Json::Bool(false)),
            b'"' => self.string().map(Json::String),
            b'[' if depth < MAX_DEPTH => {
                let mut items = Vec::new();
                self.sequence(b']', |reader| {
                    items.push(reader.value(depth + 1)?);
                    Some(())
                })?;
                Some(Json::Array(items))
            }
            b'{' if depth < MAX_DEPTH => {
                let mut members = Vec::new();
                self.sequence(b'}', |reader| {
                    let name = match reader.next_token()? {
                        b'"' => reader.string()?,
                        _ => return None,
                    };
                    (reader.next_token()? == b':').then_some(())?;
                    members.push((name, reader.value(depth + 1)?));
                    Some(())
                })?;
                Some(Json::Object(members))
            }
            b'-' | b'0'..=b'9' => {
                self.at -= 1;
                self.number()
            }
            _ => None,
        }
    }

    /// The items of an array or object after its opening byte, up to and including `close`.
    fn sequence(&mut self, close: u8, mut item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.skip_whitespace();
        if self.bytes.get(self.at) == Some(&close) {
            self.at += 1;
            return Some(());
        }
        loop {
            item(self)?;
            match self.next_token()? {
                b',' => {}
                byte if byte == close => return Some(()),
                _ => return None,
            }
        }
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`, kept as text.
    fn number(&mut self) -> Option<Json> {
        let start = self.at;
        self.eat(b"-");
        if !self.eat(b"0") && self.digits() == 0 {
            return None;
        }
        if self.eat(b".") && self.digits() == 0 {
            return None;
        }
        if self.eat(b"eE") {
            self.eat(b"+-");
            if self.digits() == 0 {
                return None;
            }
        }
        // Only ASCII bytes were consumed, so the slice is on char boundaries.
        std::str::from_utf8(&self.bytes[start..self.at])
            .ok()
            .map(|text| Json::Number(text.to_owned()))
    }

    /// Consumes one byte if it is one of `any`.
    fn eat(&mut self, any: &[u8]) -> bool {
        let hit = self.bytes.get(self.at).is_some_and(|byte| any.contains(byte));
        self.at += usize::from(hit);
        hit
    }

    fn digits(&mut self) -> usize {
        let start = self.at;
        while self.bytes.get(self.at).is_some_and(u8::is_ascii_digit) {
            self.at += 1;
        }
        self.at - start
    }

    /// A string's contents after its opening quote, up to and including the closing one, unescaped.
    fn string(&mut self) -> Option<String> {
        let mut text = Vec::new();
        loop {
            let byte = *self.bytes.get(self.at)?;
            self.at += 1;
            match byte {
                b'"' => return String::from_utf8(text).ok(),
                b'\\' => {
                    let escaped = *self.bytes.get(self.at)?;
                    self.at += 1;
                    let c = match escaped {
                        b'"' | b'\\' | b'/' => char::from(escaped),
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => self.unicode_escape()?,
                        _ => return None,
                    };
                    text.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                }
                0..=0x1f => return None,
                // Any other byte, including those of multi-byte characters: the text was valid UTF-8, and escapes
                // only ever add whole characters, so the bytes stay valid UTF-8.
                _ => text.push(byte),
            }
        }
    }

    /// The character of a `\uXXXX` escape (after the `u`), joining a surrogate pair written as two escapes.
    fn unicode_escape(&mut self) -> Option<char> {
        let high = self.hex4()?;
        if !(0xD800..0xDC00).contains(&high) {
            return char::from_u32(high);
        }
        if self.bytes.get(self.at..self.at + 2)? != b"\\u" {
            return None;
        }
        self.at += 2;
        let low = self.hex4()?;
        if !(0xDC00..0xE000).contains(&low) {
            return None;
        }
        char::from_u32(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = std::str::from_utf8(self.bytes.get(self.at..self.at + 4)?).ok()?;
        // from_str_radix would also take a sign.
        if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        self.at += 4;
        u32::from_str_radix(digits, 16).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_json_shape() {
        let text = r#" {"result": [null, true, false, -12, 0, 1.5e-3, "a\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00", [], {}], "x": {"y": 2}} "#;
        let json = Json::parse(text).unwrap();
        let Some(Json::Array(items)) = json.get("result") else {
            panic!("{json}")
        };
        assert_eq!(items[0], Json::Null);
        assert_eq!(items[1], Json::Bool(true));
        assert_eq!(items[3], Json::Number("-12".into()));
        assert_eq!(items[5], Json::Number("1.5e-3".into()));
        assert_eq!(items[6].as_str(), Some("a\"\\/\u{8}\u{c}\n\r\té😀"));
        assert_eq!(json.get("x").and_then(|x| x.get("y")), Some(&Json::Number("2".into())));
        assert_eq!(json.get("missing"), None);
        assert_eq!(
            json.to_string(),
            r#"{"result":[null,true,false,-12,0,1.5e-3,"a\"\\/\b\f\n\r\té😀",[],{}],"x":{"y":2}}"#
        );
    }

    #[test]
    fn refuses_what_is_not_json() {
        for bad in [
            "",
            " ",
            "nul",
            "[1,]",
            "[1 2]",
            "{\"a\" 1}",
            "{a:1}",
            "01",
            "-",
            "1.",
            "1e",
            ".5",
            "+1",
            "\"abc",
            "\"a\u{1}\"",
            "\"\\x\"",
            "\"\\u12\"",
            "\"\\ud800\"",
            "\"\\ud800\\u0041\"",
            "\"\\u+123\"",
            "[1] x",
            "[",
            "{\"a\":1",
            "NaN",
        ] {
            assert_eq!(Json::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn nesting_is_bounded_instead_of_exhausting_the_stack() {
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(Json::parse(&deep(MAX_DEPTH)).is_some());
        assert_eq!(Json::parse(&deep(MAX_DEPTH + 1)), None);
        assert_eq!(Json::parse(&"[".repeat(1 << 20)), None);
    }

    #[test]
    fn strings_round_trip_through_the_writer() {
        for text in ["", "plain", "q\"b\\", "\u{0}\u{1f}\n\t\r", "é😀", "\u{7f}"] {
            let mut written = String::new();
            write_string(&mut written, text).unwrap();
            assert_eq!(Json::parse(&written), Some(Json::String(text.into())), "{written}");
        }
    }

    #[test]
    fn writes_and_reads_strings_as_serde_json_does() {
        let every_control: String = ('\0'..='\x1f').collect();
        for text in [every_control.as_str(), "\u{7f}é😀\u{2028}", "a/b\"c\\d", ""] {
            let mut written = String::new();
            write_string(&mut written, text).unwrap();
            assert_eq!(written, serde_json::to_string(text).unwrap());
        }
        let text = r#"["\u00e9\ud83d\ude00\/", -7, 12345678901234567890, {"k": [true, null]}]"#;
        let ours = Json::parse(text).unwrap().to_string();
        assert_eq!(
            ours,
            serde_json::from_str::<serde_json::Value>(text).unwrap().to_string()
        );
    }

    #[test]
    fn commands_are_arrays_of_strings() {
        let mut body = String::new();
        push_string_array(&mut body, &["EVALSHA".to_owned(), "a\"b".to_owned(), "1".to_owned()]);
        push_string_array(&mut body, &[]);
        assert_eq!(body, r#"["EVALSHA","a\"b","1"][]"#);
    }
}
