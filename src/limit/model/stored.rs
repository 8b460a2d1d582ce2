//! The string states as the scripts store them (`tb:<units>:<at>`, `gcra:<ms>:<rem>`, `fw:<window>:<count>`,
//! `sw:<window>:<current>:<previous>`), read into the model's state, so [`limit::state`](crate::limit::state) shows
//! a stored value through the code that decides.

use super::bucket::{Gcra, TokenBucket};
use super::fixed_window::FixedWindow;
use super::sliding_window::SlidingWindow;
use crate::error::{Error, Result};
use crate::limit::{Algorithm, Quota};

/// Lua's numbers are doubles: whole numbers are exact below 2^53, and the scripts keep theirs there.
const MAX_EXACT: u64 = 1 << 53;

/// Each string algorithm's tag and the fields after it.
const TAGS: [(Algorithm, &str, &str); 4] = [
    (Algorithm::TokenBucket, "tb:", "<units>:<at>"),
    (Algorithm::Gcra, "gcra:", "<ms>:<rem>"),
    (Algorithm::FixedWindow, "fw:", "<window>:<count>"),
    (Algorithm::SlidingWindow, "sw:", "<window>:<current>:<previous>"),
];

/// What a string state holds at `now`, as the next decision would see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StoredView {
    /// Units in the bucket (tokens × interval), refilled to `now`.
    TokenBucket { units: u64 },
    /// The debt at `now`: (TAT − now) × rate units, 0 when none.
    Gcra { debt: u64 },
    /// The current window (a stored later one stays current) and its count.
    FixedWindow { window: u64, count: u64 },
    /// The current window and the counts of it and of the one before.
    SlidingWindow { window: u64, current: u64, previous: u64 },
}

/// Reads `text` (the key's value, '' for no key) as `quota`'s algorithm stores it and brings it to `now`. Another
/// algorithm's state is [`Error::ForeignState`] and an unknown layout [`Error::MalformedReply`], as the scripts
/// refuse both.
pub(crate) fn view(quota: &Quota, text: &str, now: u64) -> Result<StoredView> {
    let algorithm = quota.algorithm();
    let (_, tag, layout) =
        TAGS.iter().find(|(tagged, _, _)| *tagged == algorithm).ok_or_else(|| no_string_state(algorithm))?;
    let fields = fields_of(algorithm, text).map_err(|error| match error {
        Error::ForeignState(_) => error,
        _ => Error::malformed(format!("a stored state {tag}{layout}"), text),
    })?;
    let pair = fields.as_deref().map(|f| (f[0], f[1]));
    Ok(match algorithm {
        Algorithm::TokenBucket => StoredView::TokenBucket { units: TokenBucket(pair).units(quota, now).0 },
        Algorithm::Gcra => StoredView::Gcra { debt: Gcra(pair).debt(quota, now) },
        Algorithm::FixedWindow => {
            let (window, count) = FixedWindow(pair).count(quota, now);
            StoredView::FixedWindow { window, count }
        }
        Algorithm::SlidingWindow => {
            let stored = fields.map(|f| (f[0], f[1], f[2]));
            let (window, _, current, previous) = SlidingWindow(stored).counts(quota, now);
            StoredView::SlidingWindow { window, current, previous }
        }
        Algorithm::Concurrency | Algorithm::SlidingLog => return Err(no_string_state(algorithm)),
    })
}

/// The numbers of `text` as `algorithm`'s state, read as the scripts read it: '' is none; another string
/// algorithm's state (two limits sharing a name) is foreign; anything else is malformed.
fn fields_of(algorithm: Algorithm, text: &str) -> Result<Option<Vec<u64>>> {
    match TAGS.iter().find(|(_, tag, _)| text.starts_with(tag)) {
        Some((tagged, tag, layout)) => {
            let fields = numbers(&text[tag.len()..], tag, layout)?;
            if *tagged != algorithm {
                return Err(Error::ForeignState(format!(
                    "a {algorithm} limit found a {tagged} limit's state: two limits share its name with different \
                     algorithms; give each its own name"
                )));
            }
            Ok(Some(fields))
        }
        None if text.is_empty() => Ok(None),
        None => Err(Error::malformed("a string algorithm's stored state", text)),
    }
}

fn no_string_state(algorithm: Algorithm) -> Error {
    Error::malformed("a string state", format!("a {algorithm} limit, which keeps a log"))
}

/// The `:`-separated whole numbers of `text`, as many as `layout` names: digits only (Lua's `%d+`), below 2^53.
fn numbers(text: &str, tag: &str, layout: &str) -> Result<Vec<u64>> {
    let malformed = || Error::malformed(format!("a stored state {tag}{layout}"), format!("{tag}{text}"));
    let numbers: Vec<u64> = text
        .split(':')
        .map(|part| {
            let digits = !part.is_empty() && part.bytes().all(|byte| byte.is_ascii_digit());
            match part.parse::<u64>() {
                Ok(n) if digits && n < MAX_EXACT => Ok(n),
                _ => Err(malformed()),
            }
        })
        .collect::<Result<_>>()?;
    if numbers.len() == layout.split(':').count() {
        Ok(numbers)
    } else {
        Err(malformed())
    }
}
