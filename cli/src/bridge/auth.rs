//! Bearer-token authentication.
//!
//! The comparison runs in constant time over SHA1 digests of the two tokens, so neither the position of the first
//! differing byte nor the token's length shows in the response time.

use subtle::ConstantTimeEq;

/// The token a request must present as `Authorization: Bearer <token>`.
#[derive(Clone)]
pub struct TokenCheck {
    digest: [u8; 20],
}

impl TokenCheck {
    /// Accepts exactly `token`.
    pub fn new(token: &str) -> Self {
        TokenCheck {
            digest: sha1_smol::Sha1::from(token).digest().bytes(),
        }
    }

    /// True when the `Authorization` header value carries the expected bearer token.
    pub fn accepts(&self, authorization: Option<&[u8]>) -> bool {
        let Some(presented) = authorization.and_then(|value| value.strip_prefix(b"Bearer ")) else {
            return false;
        };
        let digest = sha1_smol::Sha1::from(presented).digest().bytes();
        digest.ct_eq(&self.digest).into()
    }
}

impl std::fmt::Debug for TokenCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenCheck(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_only_the_exact_bearer_token() {
        let check = TokenCheck::new("s3cret");
        assert!(check.accepts(Some(b"Bearer s3cret")));
        assert!(!check.accepts(Some(b"Bearer s3cre")));
        assert!(!check.accepts(Some(b"Bearer s3cret ")));
        assert!(!check.accepts(Some(b"bearer s3cret")));
        assert!(!check.accepts(Some(b"s3cret")));
        assert!(!check.accepts(None));
    }
}
