//! Helpers every scenario shares.

use std::fmt::Display;

/// Unix ms where explicit-time workloads start: a whole second, so that windows begin where the workloads expect.
pub(crate) const EXPLICIT_T0: u64 = 1_700_000_000_000;

/// Rounds of a Redis-cost workload (scenarios 1 and 2); each contender keeps its cheapest, the round least disturbed
/// by other load on the shared cores.
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

/// `rounds` rounds in which each of `count` contenders runs `measure(contender, round)` in turn; with `rotate`, who
/// goes first moves on by one each round, so that none always meets a busier machine. Every result, by contender.
pub(crate) async fn take_turns<T>(
    rounds: usize,
    count: usize,
    rotate: bool,
    mut measure: impl AsyncFnMut(usize, usize) -> Result<T, String>,
) -> Result<Vec<Vec<T>>, String> {
    let mut runs: Vec<Vec<T>> = (0..count).map(|_| Vec::new()).collect();
    for round in 0..rounds {
        for place in 0..count {
            let which = if rotate { (place + round) % count } else { place };
            runs[which].push(measure(which, round).await?);
        }
    }
    Ok(runs)
}

/// Each contender's best run of [`take_turns`]: the one `better(run, best so far)` prefers, the first of equals.
pub(crate) fn best_each<T, const N: usize>(
    runs: Vec<Vec<T>>,
    better: impl Fn(&T, &T) -> bool,
) -> Result<[T; N], String> {
    let best = runs.into_iter().map(|runs| runs.into_iter().reduce(|a, b| if better(&b, &a) { b } else { a }));
    let best: Vec<T> = best.collect::<Option<_>>().ok_or("a contender was never measured")?;
    best.try_into().map_err(|_| "a contender more or less than expected".to_owned())
}

/// The stdout of `command` (`what` names it in errors) when it ran and succeeded; else an error with its stderr.
pub(crate) async fn stdout_of(command: &mut tokio::process::Command, what: &str) -> Result<String, String> {
    let output = command.output().await.context(format_args!("could not run {what}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(format!("{what} failed ({}):\n{stderr}{stdout}", output.status));
    }
    Ok(stdout)
}
