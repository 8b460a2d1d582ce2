//! One reply budget for all the replies of one `/pipeline`, kept as they stream in.
//!
//! A pipeline's N replies are one message to the redis crate, which collects them all before the bridge sees any, so
//! the reply cap alone would let N capped replies pile up. The bridge starts each pipeline of two or more commands
//! with `ECHO <marker><count>`; the reply cap, reading that echo, holds the next `count` replies to one cap together.
//! A marker is 128 random bits, registered before sending and good once, so a client cannot forge one. Why and how:
//! docs/design/bridge-memory.md.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

/// How every marker begins; 32 hex digits follow.
const PREFIX: &[u8] = b"edgelimit-bridge pipeline ";

/// The markers sent and not yet read, each with the number of replies it announces.
static WAITING: Mutex<Option<HashMap<u128, u64>>> = Mutex::new(None);

fn waiting<T>(act: impl FnOnce(&mut HashMap<u128, u64>) -> T) -> T {
    // A panic while the lock was held leaves at worst a stale entry, never a half-written one.
    let mut lock = WAITING.lock().unwrap_or_else(PoisonError::into_inner);
    act(lock.get_or_insert_with(HashMap::new))
}

/// A pipeline of `count` commands, errors kept per command, and for two or more commands the marker first, which
/// [`Announced::replies`] takes out again (no marker without OS randomness).
pub(super) fn pipeline(count: usize) -> (redis::Pipeline, Announced) {
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    let mut random = [0u8; 16];
    let marker = (count >= 2 && getrandom::getrandom(&mut random).is_ok()).then(|| u128::from_le_bytes(random));
    if let Some(marker) = marker {
        waiting(|markers| markers.insert(marker, count as u64));
        let mut echo = PREFIX.to_vec();
        echo.extend_from_slice(format!("{marker:032x}").as_bytes());
        pipe.cmd("ECHO").arg(echo);
    }
    (pipe, Announced(marker))
}

/// The marker a pipeline starts with, if any; dropping it forgets the marker, read or not.
#[derive(Debug)]
pub(super) struct Announced(Option<u128>);

impl Announced {
    /// The commands' replies, without the marker's (whatever it was: an echo, or Redis's refusal of it).
    pub(super) fn replies<T>(self, mut replies: Vec<T>) -> Vec<T> {
        if self.0.is_some() && !replies.is_empty() {
            replies.remove(0);
        }
        replies
    }
}

impl Drop for Announced {
    fn drop(&mut self) {
        if let Some(marker) = self.0 {
            waiting(|markers| markers.remove(&marker));
        }
    }
}

/// The count a marker's echo announces, when `reply` is the echo of a marker still waiting (which it then no longer
/// is); `None` for any other reply.
pub(super) fn announced_count(reply: &[u8]) -> Option<u64> {
    let body = reply.strip_prefix(b"$")?;
    let header_end = body.iter().position(|&b| b == b'\n')?;
    let payload = body[header_end + 1..].strip_suffix(b"\r\n")?;
    let hex = payload.strip_prefix(PREFIX)?;
    if hex.len() != 32 {
        return None;
    }
    let marker = u128::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?;
    waiting(|markers| markers.remove(&marker))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How Redis echoes `payload`.
    fn echo_of(payload: &[u8]) -> Vec<u8> {
        let mut reply = format!("${}\r\n", payload.len()).into_bytes();
        reply.extend_from_slice(payload);
        reply.extend_from_slice(b"\r\n");
        reply
    }

    /// The marker a pipeline sends.
    fn marker_of(pipe: &redis::Pipeline) -> Vec<u8> {
        let packed = pipe.get_packed_pipeline();
        let at = packed.windows(PREFIX.len()).position(|w| w == PREFIX).unwrap();
        packed[at..at + PREFIX.len() + 32].to_vec()
    }

    #[test]
    fn a_waiting_marker_announces_once_and_nothing_else_does() {
        let (pipe, announced) = pipeline(3);
        let marker = marker_of(&pipe);
        assert_eq!(announced_count(&echo_of(&marker)), Some(3));
        assert_eq!(announced_count(&echo_of(&marker)), None, "a marker read (or seen in a log) is spent");
        drop(announced);

        let (pipe, announced) = pipeline(2);
        let marker = marker_of(&pipe);
        let mut other = marker.clone();
        other[PREFIX.len()] ^= 1;
        for reply in [
            echo_of(&other),
            echo_of(PREFIX),
            echo_of(&marker[..marker.len() - 1]),
            echo_of(&[&marker[..], b"0"].concat()),
            b"+OK\r\n".to_vec(),
            b":1\r\n".to_vec(),
            b"$-1\r\n".to_vec(),
        ] {
            assert_eq!(announced_count(&reply), None, "{}", String::from_utf8_lossy(&reply));
        }
        // A pipeline that ends before its echo arrives (its connection failed) takes its marker with it.
        drop(announced);
        assert_eq!(announced_count(&echo_of(&marker)), None);
    }

    #[test]
    fn a_single_command_goes_without_the_marker() {
        let (pipe, announced) = pipeline(1);
        assert!(pipe.cmd_iter().next().is_none());
        assert_eq!(announced.replies(vec![1]), vec![1]);
        let (pipe, announced) = pipeline(2);
        assert_eq!(pipe.cmd_iter().count(), 1);
        assert_eq!(announced.replies(vec![0, 1, 2]), vec![1, 2]);
    }
}
