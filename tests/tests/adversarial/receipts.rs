//! See `tests/tests/adversarial.rs`.
