//! Helpers every scenario shares.

use std::fmt::Display;

/// Unix ms where explicit-time workloads start: a whole second, so that windows begin where the workloads expect.
pub(crate) const EXPLICIT_T0: u64 = 1_700_000_000_000;

/// Rounds of a Redis-cost workload (scenarios 1 and 2): the contenders take turns and each keeps its cheapest, the
/// round least disturbed by other load on the shared cores.
pub(crate) const ROUNDS: usize = 3;

/// `numerator / denominator` when that is a number (the denominator measured above zero).
pub(crate) fn ratio(numerator: f64, denominator: f64) -> Option<f64> {
    let ratio = numerator / denominator;
    (denominator > 0.0 && ratio.is_finite()).then_some(ratio)
}

/// The next number of the splitmix64 sequence: seeded draws (clock skews, grant weights) every run repeats.
pub(crate) fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Adds what was being done to an error's message.
pub(crate) trait Context<T> {
    /// `self`, with an error's message prefixed by `doing` ("could not write x: …").
    fn context(self, doing: impl Display) -> Result<T, String>;
}

impl<T, E: Display> Context<T> for Result<T, E> {
    fn context(self, doing: impl Display) -> Result<T, String> {
        self.map_err(|e| format!("{doing}: {e}"))
    }
}
