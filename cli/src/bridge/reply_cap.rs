//! The reply cap: a bounded reader between the Redis socket and the redis crate.
//!
//! The redis crate holds each reply whole, and the bridge renders it up to six times larger as JSON, so the bridge
//! reads Redis through [`CappedStream`]: it follows RESP and replaces with an error reply ([`REPLY_TOO_LARGE`]) any
//! reply past the cap, or past what its pipeline left ([`shared_budget`]), discarding it as it arrives. It also
//! replaces replies nested past [`MAX_DEPTH`] and makes status lines UTF-8, either of which would make the redis crate
//! drop the connection. The command has run all the same. More in docs/design/bridge-memory.md.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::shared_budget;

/// How every reply the cap refused begins (the rest says how large it was and what to do).
pub const REPLY_TOO_LARGE: &str = "ERR reply too large";

/// How a reply refused for its nesting begins.
pub const REPLY_TOO_DEEP: &str = "ERR reply nested too deeply";

/// The deepest nesting passed on; the redis crate itself refuses more than 100 levels.
pub const MAX_DEPTH: usize = 64;

/// Past this nesting the peer is not Redis: the connection is dropped, so the nesting stack stays bounded.
const ABSURD_DEPTH: usize = 100_000;

/// The longest header line (`$123\r\n`, `*2\r\n`): a sign, 19 digits and CRLF fit.
const MAX_HEADER_LINE: usize = 24;

/// Bytes read from the socket at once.
const READ_CHUNK: usize = 64 * 1024;

/// A held buffer larger than this is freed after its reply instead of kept for the next one.
const KEEP_CAPACITY: usize = 64 * 1024;

/// Why the reply being read is being discarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    TooLarge,
    /// Within the cap alone, but not within what its request's earlier replies left of it.
    OverBudget,
    TooDeep,
}

/// The error of a command whose reply does not fit in what is left of its request's reply budget.
pub fn over_budget(cap: u64) -> String {
    format!(
        "{REPLY_TOO_LARGE}: the replies of this request together exceed the bridge's cap of {cap} bytes \
         (--max-reply-bytes, EDGELIMIT_MAX_REPLY_BYTES); the command ran in Redis, only its reply was discarded: \
         send fewer commands per request or raise the cap"
    )
}

/// Replies announced as one request's, and what they have left of the cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SharedBudget {
    replies: u64,
    bytes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Expecting the type byte of a value.
    Type,
    /// Inside the line that follows type byte `kind`, up to its LF.
    Line { kind: u8 },
    /// Inside a blob's payload and its CRLF.
    Blob { remaining: u64 },
}

/// Follows RESP (2 and 3) byte by byte and decides, reply by reply, what the redis crate receives.
#[derive(Debug)]
pub(super) struct Scanner {
    cap: u64,
    state: State,
    /// Remaining children of each open aggregate, innermost last.
    stack: Vec<u64>,
    /// The header line being read (`123\r\n` after `$`), for aggregates and blobs.
    header: Vec<u8>,
    /// The bytes of the current top-level reply, while it is within the cap and not refused.
    held: Vec<u8>,
    /// Where in `held` the current status/error line starts (after its type byte).
    line_start: usize,
    /// Wire bytes of the current top-level reply so far, refused or not.
    size: u64,
    refused: Option<Refusal>,
    /// The budget the replies being read share, while an announced pipeline's replies arrive.
    shared: Option<SharedBudget>,
}

fn protocol_error(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("not a RESP reply from Redis: {}", what.into()))
}

impl Scanner {
    pub(super) fn new(cap: u64) -> Self {
        Scanner {
            cap,
            state: State::Type,
            stack: Vec::new(),
            header: Vec::with_capacity(MAX_HEADER_LINE),
            held: Vec::new(),
            line_start: 0,
            size: 0,
            refused: None,
            shared: None,
        }
    }

    /// The most bytes the current reply may have (the cap, or what its request's earlier replies left) and why a
    /// larger one is refused.
    fn limit(&self) -> (u64, Refusal) {
        match self.shared {
            Some(shared) if shared.bytes < self.cap => (shared.bytes, Refusal::OverBudget),
            _ => (self.cap, Refusal::TooLarge),
        }
    }

    /// Follows `input`; appends every completed top-level reply (or its replacement) to `out`.
    pub(super) fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        let mut rest = input;
        while let Some((&first, after_first)) = rest.split_first() {
            match self.state {
                State::Type => {
                    self.take(&rest[..1]);
                    rest = after_first;
                    self.begin_value(first)?;
                }
                State::Line { kind } => {
                    let (line, done) = match rest.iter().position(|&b| b == b'\n') {
                        Some(lf) => rest.split_at(lf + 1),
                        None => (rest, &rest[rest.len()..]),
                    };
                    let complete = line.last() == Some(&b'\n');
                    self.take(line);
                    if has_header(kind) {
                        if self.header.len() + line.len() > MAX_HEADER_LINE {
                            return Err(protocol_error("a length line too long"));
                        }
                        self.header.extend_from_slice(line);
                    }
                    rest = done;
                    if complete {
                        self.end_line(kind, out)?;
                    }
                }
                State::Blob { remaining } => {
                    let n = usize::try_from(remaining).map_or(rest.len(), |r| r.min(rest.len()));
                    let (payload, after) = rest.split_at(n);
                    self.take(payload);
                    rest = after;
                    // `n` is at most `remaining`, so this cannot underflow.
                    let remaining = remaining - n as u64;
                    if remaining == 0 {
                        self.state = State::Type;
                        self.value_done(out);
                    } else {
                        self.state = State::Blob { remaining };
                    }
                }
            }
        }
        Ok(())
    }

    /// Counts `bytes` into the current reply and holds them, unless the reply is refused or now is.
    fn take(&mut self, bytes: &[u8]) {
        self.size = self.size.saturating_add(bytes.len() as u64);
        if self.refused.is_some() {
            return;
        }
        let (limit, refusal) = self.limit();
        if self.size > limit {
            self.refuse(refusal);
        } else {
            self.held.extend_from_slice(bytes);
        }
    }

    fn refuse(&mut self, why: Refusal) {
        if self.refused.is_none() {
            self.refused = Some(why);
            self.held = Vec::new();
        }
    }

    fn begin_value(&mut self, kind: u8) -> io::Result<()> {
        match kind {
            b'+' | b'-' | b':' | b'_' | b'#' | b',' | b'(' | b'$' | b'*' | b'%' | b'~' | b'>' | b'|' | b'!' | b'=' => {
                self.header.clear();
                self.line_start = self.held.len();
                self.state = State::Line { kind };
                Ok(())
            }
            other => Err(protocol_error(format!("unknown type byte 0x{other:02x}"))),
        }
    }

    fn end_line(&mut self, kind: u8, out: &mut Vec<u8>) -> io::Result<()> {
        self.state = State::Type;
        if !has_header(kind) {
            if matches!(kind, b'+' | b'-') {
                self.make_line_utf8();
            }
            self.value_done(out);
            return Ok(());
        }
        let text = self.header.strip_suffix(b"\r\n").ok_or_else(|| protocol_error("a length line without CRLF"))?;
        let number: i64 = std::str::from_utf8(text)
            .ok()
            .and_then(|text| text.parse().ok())
            .ok_or_else(|| protocol_error("a length that is not a number"))?;
        if number == -1 && matches!(kind, b'$' | b'*') {
            // RESP2's null bulk string and null array.
            self.value_done(out);
            return Ok(());
        }
        let count = u64::try_from(number).map_err(|_| protocol_error("a negative length"))?;
        match kind {
            b'$' | b'!' | b'=' => {
                // The payload and its CRLF; a payload that cannot fit is refused now, not after reading up to the cap.
                let remaining = count.saturating_add(2);
                let (limit, refusal) = self.limit();
                if self.size.saturating_add(remaining) > limit {
                    self.refuse(refusal);
                }
                self.state = State::Blob { remaining };
            }
            _ => {
                let children = match kind {
                    b'%' => count.saturating_mul(2),
                    // An attribute map is followed by the value it describes.
                    b'|' => count.saturating_mul(2).saturating_add(1),
                    _ => count,
                };
                if children == 0 {
                    self.value_done(out);
                } else {
                    if self.stack.len() >= ABSURD_DEPTH {
                        return Err(protocol_error("a reply nested beyond any Redis reply"));
                    }
                    self.stack.push(children);
                    if self.stack.len() > MAX_DEPTH {
                        self.refuse(Refusal::TooDeep);
                    }
                }
            }
        }
        Ok(())
    }

    /// Replaces bytes that are not UTF-8 in the status or error line just read (the redis crate requires UTF-8 there).
    fn make_line_utf8(&mut self) {
        if self.refused.is_some() {
            return;
        }
        let Some(line) = self.held.get(self.line_start..) else {
            return;
        };
        if std::str::from_utf8(line).is_ok() {
            return;
        }
        let fixed = String::from_utf8_lossy(line).into_owned();
        self.held.truncate(self.line_start);
        self.held.extend_from_slice(fixed.as_bytes());
    }

    /// One value ended: closes the aggregates it completes, and the top-level reply when it is the last.
    fn value_done(&mut self, out: &mut Vec<u8>) {
        while let Some(remaining) = self.stack.last_mut() {
            *remaining = remaining.saturating_sub(1);
            if *remaining > 0 {
                return;
            }
            self.stack.pop();
        }
        self.finish_reply(out);
    }

    fn finish_reply(&mut self, out: &mut Vec<u8>) {
        let refused = self.refused.take();
        match &mut self.shared {
            Some(shared) => {
                if refused.is_none() {
                    // Passed on, so within what was left.
                    shared.bytes = shared.bytes.saturating_sub(self.size);
                }
                shared.replies -= 1;
                if shared.replies == 0 {
                    self.shared = None;
                }
            }
            None if refused.is_none() => {
                self.shared = shared_budget::announced_count(&self.held)
                    .filter(|&replies| replies > 0)
                    .map(|replies| SharedBudget { replies, bytes: self.cap });
            }
            None => {}
        }
        match refused {
            None if out.is_empty() => std::mem::swap(out, &mut self.held),
            None => out.extend_from_slice(&self.held),
            Some(why) => out.extend_from_slice(self.replacement(why).as_bytes()),
        }
        self.held.clear();
        if self.held.capacity() > KEEP_CAPACITY {
            self.held = Vec::new();
        }
        self.size = 0;
    }

    fn replacement(&self, why: Refusal) -> String {
        let ran = "the command ran in Redis; only its reply was discarded";
        match why {
            Refusal::TooLarge => format!(
                "-{REPLY_TOO_LARGE}: Redis answered {} bytes, above the bridge's cap of {} bytes \
                 (--max-reply-bytes, EDGELIMIT_MAX_REPLY_BYTES); {ran}: read less at once (GETRANGE, LRANGE or SCAN with smaller \
                 counts) or raise the cap\r\n",
                self.size, self.cap
            ),
            Refusal::OverBudget => format!("-{}\r\n", over_budget(self.cap)),
            Refusal::TooDeep => format!(
                "-{REPLY_TOO_DEEP}: Redis answered an array nested more than {MAX_DEPTH} levels deep, which the \
                 bridge does not pass on; {ran}\r\n"
            ),
        }
    }
}

/// Types whose line is a length or count.
fn has_header(kind: u8) -> bool {
    matches!(kind, b'$' | b'*' | b'%' | b'~' | b'>' | b'|' | b'!' | b'=')
}

/// A connection to Redis whose replies pass through a [`Scanner`]; what the bridge sends passes unchanged.
pub(super) struct CappedStream<S> {
    inner: S,
    scanner: Scanner,
    /// Bytes ready for the redis crate, from `ready_at` on.
    ready: Vec<u8>,
    ready_at: usize,
    chunk: Box<[u8]>,
    eof: bool,
}

impl<S> CappedStream<S> {
    pub(super) fn new(inner: S, cap: u64) -> Self {
        CappedStream {
            inner,
            scanner: Scanner::new(cap),
            ready: Vec::new(),
            ready_at: 0,
            chunk: vec![0; READ_CHUNK].into_boxed_slice(),
            eof: false,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for CappedStream<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            if let Some(ready) = this.ready.get(this.ready_at..).filter(|ready| !ready.is_empty()) {
                let n = ready.len().min(buf.remaining());
                buf.put_slice(&ready[..n]);
                this.ready_at += n;
                if this.ready_at == this.ready.len() {
                    this.ready.clear();
                    this.ready_at = 0;
                    if this.ready.capacity() > KEEP_CAPACITY {
                        this.ready = Vec::new();
                    }
                }
                return Poll::Ready(Ok(()));
            }
            if this.eof {
                // End of stream (a reply cut short is dropped: the redis crate sees the connection close).
                return Poll::Ready(Ok(()));
            }
            let mut chunk = ReadBuf::new(&mut this.chunk);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut chunk))?;
            let read = chunk.filled();
            if read.is_empty() {
                this.eof = true;
            } else {
                this.scanner.feed(read, &mut this.ready)?;
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for CappedStream<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `input` in pieces of `step` bytes; what the redis crate would receive.
    fn scan(cap: u64, input: &[u8], step: usize) -> Vec<u8> {
        let mut scanner = Scanner::new(cap);
        let mut out = Vec::new();
        for piece in input.chunks(step) {
            scanner.feed(piece, &mut out).unwrap();
        }
        assert!(scanner.held.is_empty() && scanner.stack.is_empty(), "a reply left open");
        out
    }

    fn every_step(cap: u64, input: &[u8]) -> Vec<u8> {
        let whole = scan(cap, input, input.len().max(1));
        for step in 1..8 {
            assert_eq!(scan(cap, input, step), whole, "split every {step} bytes");
        }
        whole
    }

    const REPLIES: &[u8] = b"+OK\r\n-ERR no\r\n:-42\r\n$5\r\nhello\r\n$-1\r\n*-1\r\n*0\r\n\
        *3\r\n$1\r\na\r\n*2\r\n:1\r\n$0\r\n\r\n+x\r\n%1\r\n+k\r\n:1\r\n~1\r\n_\r\n>2\r\n+p\r\n#t\r\n\
        |1\r\n+ttl\r\n:3\r\n,1.5\r\n(12345678901234567890\r\n!3\r\nbad\r\n=7\r\ntxt:abc\r\n";

    #[test]
    fn replies_within_the_cap_pass_unchanged_however_they_are_split() {
        assert_eq!(every_step(1 << 20, REPLIES), REPLIES);
    }

    #[test]
    fn a_reply_above_the_cap_is_replaced_and_the_next_passes() {
        let mut input = b"$20\r\n01234567890123456789\r\n".to_vec();
        input.extend_from_slice(b"*3\r\n$4\r\nabcd\r\n$4\r\nefgh\r\n$4\r\nijkl\r\n+after\r\n");
        let out = String::from_utf8(every_step(24, &input)).unwrap();
        let lines: Vec<&str> = out.split_terminator("\r\n").collect();
        assert_eq!(lines.len(), 3, "{out}");
        assert!(lines[0].starts_with(&format!("-{REPLY_TOO_LARGE}: Redis answered 27 bytes")));
        assert!(lines[1].starts_with(&format!("-{REPLY_TOO_LARGE}: Redis answered 34 bytes")));
        assert_eq!(lines[2], "+after");
    }

    /// The echo of a marker announcing `count` (at least 2) replies (shared_budget.rs), still waiting to be read.
    fn marker(count: usize) -> Vec<u8> {
        let (pipe, announced) = shared_budget::pipeline(count);
        // Waiting until the test's process ends (its pipeline never goes out).
        std::mem::forget(announced);
        let packed = pipe.get_packed_pipeline();
        // `*2\r\n$4\r\nECHO\r\n` and then the marker as a bulk string, which is how Redis echoes it.
        packed[packed.len() - packed.iter().rev().skip(2).position(|&b| b == b'$').unwrap() - 3..].to_vec()
    }

    #[test]
    fn announced_replies_share_the_cap_and_are_discarded_past_it_without_being_held() {
        let value = |n: usize| format!("${n}\r\n{}\r\n", "v".repeat(n)).into_bytes();
        // 100 bytes of cap (the marker's echo, some 65 bytes, fits); each 40-byte value is 46 bytes on the wire.
        // Three announced, then one more on its own.
        for step in [1, 3, usize::MAX] {
            // A fresh marker each time: one is good once.
            let mut input = marker(3);
            for _ in 0..4 {
                input.extend_from_slice(&value(40));
            }
            let mut scanner = Scanner::new(100);
            let mut out = Vec::new();
            for piece in input.chunks(step) {
                scanner.feed(piece, &mut out).unwrap();
                assert!(scanner.held.len() <= 100, "held {} bytes", scanner.held.len());
            }
            let out = String::from_utf8(out).unwrap();
            let replies: Vec<&str> = out.split_terminator("\r\n").collect();
            // The marker's echo (two lines), two values (two each), the third's error, the fourth value.
            assert_eq!(replies.len(), 2 + 2 + 2 + 1 + 2, "{out}");
            assert!(replies[2] == "$40" && replies[4] == "$40", "{out}");
            assert_eq!(replies[6], format!("-{}", over_budget(100)));
            // The fourth is no longer the request's: the whole cap again.
            assert_eq!(replies[7], "$40");
        }
    }

    #[test]
    fn a_marker_inside_an_announced_batch_or_nested_announces_nothing() {
        // Two announced replies: a marker's echo, and one nested in an array; neither announces more.
        let mut input = marker(2);
        input.extend_from_slice(&marker(5));
        input.extend_from_slice(b"*1\r\n");
        input.extend_from_slice(&marker(5));
        // Then two values of 90 bytes on the wire, each alone within the cap.
        let big = format!("$84\r\n{}\r\n", "b".repeat(84)).into_bytes();
        input.extend_from_slice(&big);
        input.extend_from_slice(&big);
        let mut scanner = Scanner::new(100);
        let mut out = Vec::new();
        scanner.feed(&input, &mut out).unwrap();
        assert_eq!(scanner.shared, None);
        assert!(out.ends_with(&[&big[..], &big[..]].concat()), "{}", String::from_utf8_lossy(&out));
    }

    #[test]
    fn a_huge_bulk_string_is_discarded_from_its_header_without_being_held() {
        let mut scanner = Scanner::new(1000);
        let mut out = Vec::new();
        scanner.feed(b"$199999999\r\n", &mut out).unwrap();
        assert_eq!(scanner.refused, Some(Refusal::TooLarge));
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..190 {
            scanner.feed(&chunk, &mut out).unwrap();
            assert!(out.is_empty() && scanner.held.capacity() == 0);
        }
        let tail = 199_999_999 - 190 * (1 << 20);
        scanner.feed(&vec![b'x'; tail], &mut out).unwrap();
        scanner.feed(b"\r\n:1\r\n", &mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert!(out.contains("answered 200000013 bytes, above the bridge's cap of 1000 bytes"));
        assert!(out.ends_with("\r\n:1\r\n"));
    }

    #[test]
    fn deep_nesting_is_replaced_before_the_redis_crate_refuses_it() {
        let deep = |levels: usize| {
            let mut reply = b"*1\r\n".repeat(levels);
            reply.extend_from_slice(b":1\r\n");
            reply
        };
        assert_eq!(every_step(1 << 20, &deep(MAX_DEPTH)), deep(MAX_DEPTH));
        let out = every_step(1 << 20, &deep(MAX_DEPTH + 1));
        assert!(out.starts_with(format!("-{REPLY_TOO_DEEP}").as_bytes()));
        assert_eq!(out.iter().filter(|&&b| b == b'\n').count(), 1);
    }

    #[test]
    fn status_and_error_lines_become_utf8() {
        let out = every_step(1 << 20, b"*2\r\n+a\xffb\r\n-ERR \xc3\r\n");
        assert_eq!(out, "*2\r\n+a\u{fffd}b\r\n-ERR \u{fffd}\r\n".as_bytes());
    }

    #[test]
    fn what_is_not_resp_is_an_error_not_a_panic() {
        for bad in [&b"?\r\n"[..], b"$x\r\n", b"$-2\r\n", b"*99999999999999999999999\r\n", b"$1\n"] {
            let mut out = Vec::new();
            assert!(Scanner::new(100).feed(bad, &mut out).is_err(), "{bad:?}");
        }
    }
}
