//! The adversarial suite: what an attacker or a careless caller tries against a limit, on real Redis through the
//! real bridge, each case asserting the exact safe outcome (issue "No request admitted by accident"). The npm
//! package's side of the same cases is in `tests/js/adversarial-*.test.mjs`.
//!
//! | module | what is attacked |
//! |---|---|
//! | [`errors`] | error replies, foreign state and oversized requests: never absorbed by a fail-open policy |
//! | [`identifiers`] | identifiers of any size and content: exact keys, no shared block-cache entries |
//! | [`weighted`] | weighted requests: cost independent of the weight, exact retry times |
//! | [`receipts`] | refunds and give-backs: exactly what was taken, never a denial turned into an allow |

mod errors;
mod identifiers;
mod receipts;
mod weighted;
