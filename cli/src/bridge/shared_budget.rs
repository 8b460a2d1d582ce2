//! One reply budget for all the replies of one `/pipeline`, kept as they stream in.
//!
//! The reply cap ([`super::reply_cap`]) holds each reply to `--max-reply-bytes`, but a pipeline of N commands is one
//! message to the redis crate, which collects all N replies before the bridge sees any of them (and keeps collecting
//! after the request gave up). So 400 `GET`s of an 8 MiB value held 400 × 8 MiB and killed a 2 GB bridge, although
//! only the first replies within the request's budget were ever answered.
//!
//! The reply cap cannot tell by itself which replies belong to one request: every request shares one multiplexed
//! connection, and the redis crate decides the order of writes. So the bridge tells it in-band: it starts each
//! pipeline of two or more commands with `ECHO <marker><count>`, and the reply cap, reading that echo, holds the
//! next `count` replies to one budget of the cap together. A reply that would take the budget past the cap is
//! discarded as it arrives, like a reply above the cap, and its command answers [`super::reply_cap::over_budget`].
//!
//! The marker holds a random nonce drawn once per process, which never leaves the bridge (the echo's reply is taken
//! out before the replies are rendered), so no value a client stored can pass for it. Should Redis refuse the echo
//! (a `--redis-acl off` user without `ECHO`), nothing is announced, and the bridge still holds the replies to the
//! budget when it renders them, only no longer as they arrive.
//!
//! (A cap below the echo's size, some 80 bytes, refuses the echo as it does any reply, and nothing is announced: with
//! no reply larger than that, the replies held until the budget is checked are small too.)
//!
//! A `/multi-exec` needs none of this: its commands' replies arrive as one reply, `EXEC`'s, held to the cap.

use std::sync::OnceLock;

static PREFIX: OnceLock<Vec<u8>> = OnceLock::new();

/// Draws the process's nonce, once: [`super::serve`] does so before it serves, so that an operating system without
/// randomness is a failure to start rather than a panic at some request.
pub(super) fn draw_nonce() -> Result<(), getrandom::Error> {
    if PREFIX.get().is_none() {
        let mut nonce = [0u8; 16];
        getrandom::getrandom(&mut nonce)?;
        let hex: String = nonce.iter().map(|byte| format!("{byte:02x}")).collect();
        // Two threads drawing at once both succeed; the first one's nonce is kept.
        let _ = PREFIX.set(format!("edgelimit-bridge shared reply budget {hex}:").into_bytes());
    }
    Ok(())
}

/// How the marker's echo begins: a fixed text, then the process's nonce, then a colon; the count follows. `None`
/// before [`draw_nonce`] (then no pipeline is announced).
fn prefix() -> Option<&'static [u8]> {
    PREFIX.get().map(Vec::as_slice)
}

/// A pipeline of `count` commands, as the bridge sends it: errors kept per command, and for two or more commands the
/// marker first, which [`Announced::replies`] takes out again.
pub(super) fn pipeline(count: usize) -> (redis::Pipeline, Announced) {
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    let prefix = prefix().filter(|_| count >= 2);
    if let Some(prefix) = prefix {
        let mut marker = prefix.to_vec();
        marker.extend_from_slice(count.to_string().as_bytes());
        pipe.cmd("ECHO").arg(marker);
    }
    (pipe, Announced(prefix.is_some()))
}

/// Whether a pipeline starts with the marker.
#[derive(Debug, Clone, Copy)]
pub(super) struct Announced(bool);

impl Announced {
    /// The commands' replies, without the marker's (whatever it was: an echo, or Redis's refusal of it).
    pub(super) fn replies<T>(self, mut replies: Vec<T>) -> Vec<T> {
        if self.0 && !replies.is_empty() {
            replies.remove(0);
        }
        replies
    }
}

/// The count a marker's echo announces, when `reply` (one whole RESP reply) is one; `None` for any other reply.
pub(super) fn announced_count(reply: &[u8]) -> Option<u64> {
    let body = reply.strip_prefix(b"$")?;
    let header_end = body.iter().position(|&b| b == b'\n')?;
    let payload = body[header_end + 1..].strip_suffix(b"\r\n")?;
    let count = payload.strip_prefix(prefix()?)?;
    if count.is_empty() || count.len() > 19 || !count.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(count).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echo_of(payload: &[u8]) -> Vec<u8> {
        let mut reply = format!("${}\r\n", payload.len()).into_bytes();
        reply.extend_from_slice(payload);
        reply.extend_from_slice(b"\r\n");
        reply
    }

    fn prefix() -> &'static [u8] {
        draw_nonce().unwrap();
        super::prefix().unwrap()
    }

    #[test]
    fn only_the_echo_of_this_process_marker_announces() {
        let prefix = prefix();
        let (pipe, _) = pipeline(3);
        let packed = pipe.get_packed_pipeline();
        let at = packed.windows(prefix.len()).position(|w| w == prefix).unwrap();
        let marker = &packed[at..at + prefix.len() + 1];
        assert_eq!(announced_count(&echo_of(marker)), Some(3));

        let forged = b"edgelimit-bridge shared reply budget 00000000000000000000000000000000:5";
        for other in [
            echo_of(forged),
            echo_of(prefix),
            echo_of(&[prefix, b"x"].concat()),
            echo_of(&[prefix, b"99999999999999999999"].concat()),
            b"+OK\r\n".to_vec(),
            b":1\r\n".to_vec(),
            b"$-1\r\n".to_vec(),
        ] {
            assert_eq!(announced_count(&other), None, "{}", String::from_utf8_lossy(&other));
        }
    }

    #[test]
    fn a_single_command_goes_without_the_marker() {
        draw_nonce().unwrap();
        let (pipe, announced) = pipeline(1);
        assert!(pipe.cmd_iter().next().is_none());
        assert_eq!(announced.replies(vec![1]), vec![1]);
        let (pipe, announced) = pipeline(2);
        assert_eq!(pipe.cmd_iter().count(), 1);
        assert_eq!(announced.replies(vec![0, 1, 2]), vec![1, 2]);
    }
}
