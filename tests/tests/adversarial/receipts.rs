//! See `tests/tests/adversarial/main.rs`.
