//! `POST /subscribe/<channel>` and `POST /psubscribe/<pattern>`: Redis pub/sub as server-sent events, as Upstash
//! serves it and `@upstash/redis` reads it: one `data:` line per event, fields separated by commas, the payload as
//! published (never base64):
//!
//! ```text
//! data: subscribe,chat,1
//! data: message,chat,hello
//! data: psubscribe,chat:*,1
//! data: pmessage,chat:*,chat:room1,hello
//! ```
//!
//! Each path segment is one name, percent-decoded (`/subscribe/a/b`; a `/` inside a name is `%2F`). Only admin
//! tokens may subscribe. Each request has a Redis connection of its own, read through the reply cap; it ends when the
//! client goes away, reads too slowly ([`MAX_QUEUED_EVENTS`]), Redis fails or the bridge shuts down (the last three
//! with an `event: error`). A `: keep-alive` comment every [`HEARTBEAT`] keeps proxies from closing idle streams.
//! A payload's line breaks split its event over several `data:` lines, as SSE has it.

use std::collections::HashSet;
use std::convert::Infallible;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use futures_util::StreamExt;
use redis::aio::{PubSub, PubSubStream};
use redis::ConnectionInfo;
use tokio::sync::{mpsc, watch};

use super::json::{redis_error_text, refusal_text};
use super::profile::Profile;
use super::redis_link::open_capped;
use super::{Bridge, BridgeConfig, Failure};

/// The most events waiting for one slow subscriber; past that (or past the reply cap's worth of bytes), it is dropped.
pub const MAX_QUEUED_EVENTS: usize = 1024;

/// How often an idle stream gets a `: keep-alive` comment.
pub const HEARTBEAT: Duration = Duration::from_secs(15);

/// What the two routes subscribe to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `SUBSCRIBE`: channels by name.
    Channels,
    /// `PSUBSCRIBE`: glob-style patterns.
    Patterns,
}

impl Kind {
    fn confirmation(self) -> &'static str {
        match self {
            Kind::Channels => "subscribe",
            Kind::Patterns => "psubscribe",
        }
    }

    fn names(self) -> &'static str {
        match self {
            Kind::Channels => "channel",
            Kind::Patterns => "pattern",
        }
    }
}

/// Bounds on one subscription.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Bound on connecting to Redis and on its confirming the subscription.
    pub timeout: Duration,
    /// The reply cap: the largest message read from Redis; also the most bytes of events waiting for a subscriber.
    pub max_bytes: u64,
}

/// The bridge's subscriptions: their limits, and the switch that ends them all.
pub struct Subscriptions {
    limits: Limits,
    closing: watch::Sender<bool>,
}

impl Subscriptions {
    /// Subscriptions with the limits of `config` (its Redis timeout and reply cap).
    pub fn new(config: &BridgeConfig) -> Self {
        Subscriptions {
            limits: Limits { timeout: config.redis_timeout, max_bytes: config.max_reply_bytes },
            closing: watch::channel(false).0,
        }
    }

    /// Ends every subscription, open or to come, each with a last `event: error`: for shutting down.
    pub fn close_all(&self) {
        self.closing.send_replace(true);
    }
}

/// `POST /subscribe/<channel>[/<channel>…]`.
pub(super) async fn channels(
    State(bridge): State<Arc<Bridge>>,
    Extension(profile): Extension<Profile>,
    uri: Uri,
) -> Response {
    respond(&bridge, profile, Kind::Channels, &uri).await
}

/// `POST /psubscribe/<pattern>[/<pattern>…]`.
pub(super) async fn patterns(
    State(bridge): State<Arc<Bridge>>,
    Extension(profile): Extension<Profile>,
    uri: Uri,
) -> Response {
    respond(&bridge, profile, Kind::Patterns, &uri).await
}

async fn respond(bridge: &Bridge, profile: Profile, kind: Kind, uri: &Uri) -> Response {
    // Only admin tokens: the profiles' ACL users hold no pub/sub commands, and a limiter token runs scripts only.
    if profile != Profile::Admin {
        return Failure::new(
            StatusCode::FORBIDDEN,
            format!(
                "NOPERM this token's profile ({profile}) may not {}: pub/sub needs an admin token",
                kind.confirmation()
            ),
        )
        .into_response();
    }
    let names = match names_in_path(uri.path(), kind) {
        Ok(names) => names,
        Err(why) => return Failure::bad_request(why).into_response(),
    };
    let subscriptions = &bridge.subscriptions;
    let closing = subscriptions.closing.subscribe();
    match event_stream(&bridge.redis.admin_info(), kind, names, subscriptions.limits, closing).await {
        Ok(response) => response,
        Err(failure) => failure.into_response(),
    }
}

/// The names after the route's own segment (`/subscribe/a/b` → `a`, `b`), each percent-decoded.
fn names_in_path(path: &str, kind: Kind) -> Result<Vec<Vec<u8>>, String> {
    let route = kind.confirmation();
    let usage = || format!("name the {} to {route} to: POST /{route}/<{}>", kind.names(), kind.names());
    let rest = path
        .trim_start_matches('/')
        .split_once('/')
        .map(|(_, rest)| rest)
        .filter(|rest| !rest.is_empty())
        .ok_or_else(usage)?;
    if rest.split('/').count() > MAX_QUEUED_EVENTS {
        return Err(format!(
            "at most {MAX_QUEUED_EVENTS} {}s per request: subscribe in several requests",
            kind.names()
        ));
    }
    rest.split('/')
        .map(|segment| match percent_decode(segment) {
            Some(name) if name.is_empty() => Err(format!("an empty {} name in {path:?}: {}", kind.names(), usage())),
            Some(name) => Ok(name),
            None => Err(format!("{path:?} holds a '%' that is not followed by two hex digits (write '%' as %25)")),
        })
        .collect()
}

/// `%XX` escapes decoded to their bytes; `None` for a `%` without two hex digits.
fn percent_decode(segment: &str) -> Option<Vec<u8>> {
    let mut bytes = segment.bytes();
    let mut out = Vec::with_capacity(segment.len());
    while let Some(byte) = bytes.next() {
        if byte == b'%' {
            let high = char::from(bytes.next()?).to_digit(16)?;
            let low = char::from(bytes.next()?).to_digit(16)?;
            // Two hex digits: at most 0xff.
            out.push(u8::try_from(high * 16 + low).ok()?);
        } else {
            out.push(byte);
        }
    }
    Some(out)
}

/// Subscribes to `names` on a connection of its own and answers with their events until the stream ends. A failure
/// to connect or subscribe is answered as on other routes: 503 when Redis is out of reach, 400 when it refused.
pub(super) async fn event_stream(
    info: &ConnectionInfo,
    kind: Kind,
    names: Vec<Vec<u8>>,
    limits: Limits,
    closing: watch::Receiver<bool>,
) -> Result<Response, Failure> {
    let subscribed = tokio::time::timeout(limits.timeout, subscribe(info, kind, &names, limits.max_bytes))
        .await
        .map_err(|_| {
            redis::RedisError::from(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no subscription within {} ms", limits.timeout.as_millis()),
            ))
        })
        .and_then(|subscribed| subscribed);
    let messages = match subscribed {
        Ok(pubsub) => pubsub.into_on_message(),
        Err(error) => return Err(failure(info, kind, &error)),
    };
    // Redis confirms each name with the connection's subscription count; the connection is this request's alone,
    // so that counts the distinct names so far.
    let mut seen = HashSet::new();
    let confirmations: Vec<Bytes> = names
        .iter()
        .map(|name| {
            seen.insert(name.as_slice());
            let count = seen.len().to_string();
            event(&[kind.confirmation().as_bytes(), name, count.as_bytes()])
        })
        .collect();
    let (sender, receiver) = mpsc::channel(MAX_QUEUED_EVENTS + 1);
    let queued = Arc::new(AtomicUsize::new(0));
    let budget = usize::try_from(limits.max_bytes).unwrap_or(usize::MAX);
    tokio::spawn(forward(messages, Queue { sender, queued: queued.clone(), budget }, closing));
    let events = futures_util::stream::unfold((receiver, queued), |(mut receiver, queued)| async move {
        let event = receiver.recv().await?;
        queued.fetch_sub(event.len(), Ordering::AcqRel);
        Some((Ok::<_, Infallible>(event), (receiver, queued)))
    });
    let body = futures_util::stream::iter(confirmations.into_iter().map(Ok)).chain(events);
    let mut response = Body::from_stream(body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // Asks a proxy in front (nginx) to pass events on as they come rather than buffer them.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(response)
}

/// A pub/sub connection to `info`, read through the reply cap, subscribed to `names`.
async fn subscribe(info: &ConnectionInfo, kind: Kind, names: &[Vec<u8>], cap: u64) -> redis::RedisResult<PubSub> {
    let mut pubsub = PubSub::new(info.redis_settings(), open_capped(info, cap).await?).await?;
    match kind {
        Kind::Channels => pubsub.subscribe(names).await?,
        Kind::Patterns => pubsub.psubscribe(names).await?,
    }
    Ok(pubsub)
}

/// Why a subscription could not start: a refusal is the client's 400, Redis out of reach 503.
fn failure(info: &ConnectionInfo, kind: Kind, error: &redis::RedisError) -> Failure {
    if let Some(text) = redis_error_text(error) {
        return Failure::bad_request(text);
    }
    let redis = info.addr();
    if let Some(text) = refusal_text(error, &redis.to_string()) {
        eprintln!("edgelimit bridge: {text}");
        return Failure::bad_request(text);
    }
    eprintln!("edgelimit bridge: redis at {redis} unavailable for a {}: {error}", kind.confirmation());
    Failure::new(StatusCode::SERVICE_UNAVAILABLE, format!("redis at {redis} is unavailable ({error}); retry shortly"))
}

/// The events waiting for the HTTP client, bounded in number and bytes.
struct Queue {
    /// One more slot than [`MAX_QUEUED_EVENTS`]: the last one is kept for the final `event: error`.
    sender: mpsc::Sender<Bytes>,
    /// Bytes of the events in the channel (the body stream subtracts what it takes).
    queued: Arc<AtomicUsize>,
    budget: usize,
}

impl Queue {
    /// Queues `event`, or returns false when the subscriber has fallen too far behind to take it.
    fn offer(&self, event: Bytes) -> bool {
        let queued = self.queued.load(Ordering::Acquire);
        // An event alone is always taken (it is within the reply cap already): only a backlog counts as lagging.
        let over_budget = queued > 0 && queued.saturating_add(event.len()) > self.budget;
        if over_budget || self.sender.capacity() < 2 {
            return false;
        }
        self.queued.fetch_add(event.len(), Ordering::AcqRel);
        self.sender.try_send(event).is_ok()
    }
}

/// Passes Redis's messages on as events until the subscription ends; the Redis connection is closed before the last
/// event is queued.
async fn forward(mut messages: PubSubStream, queue: Queue, mut closing: watch::Receiver<bool>) {
    let mut heartbeat = tokio::time::interval_at(tokio::time::Instant::now() + HEARTBEAT, HEARTBEAT);
    let last = loop {
        tokio::select! {
            message = messages.next() => {
                let Some(message) = message else {
                    break "ERR the subscription's connection to Redis ended (Redis went away, or sent a message above \
                           the bridge's reply cap, --max-reply-bytes): subscribe again"
                        .to_owned();
                };
                if !queue.offer(message_event(&message)) {
                    break lagging(&queue);
                }
            }
            _ = heartbeat.tick() => {
                if !queue.offer(Bytes::from_static(b": keep-alive\n\n")) {
                    break lagging(&queue);
                }
            }
            // The HTTP client went away: nothing more to say.
            () = queue.sender.closed() => return,
            _ = closing.wait_for(|closing| *closing) => {
                break "ERR the bridge is shutting down: subscribe again once it is back".to_owned();
            }
        }
    };
    drop(messages);
    let last = error_event(&last);
    queue.queued.fetch_add(last.len(), Ordering::AcqRel);
    let _ = queue.sender.try_send(last);
}

fn lagging(queue: &Queue) -> String {
    format!(
        "ERR this subscriber reads too slowly: {} bytes of events were waiting for it (at most {MAX_QUEUED_EVENTS} \
         events and {} bytes may wait); the subscription is dropped rather than buffered: subscribe again",
        queue.queued.load(Ordering::Acquire),
        queue.budget
    )
}

/// `message,<channel>,<payload>` or `pmessage,<pattern>,<channel>,<payload>`.
fn message_event(message: &redis::Msg) -> Bytes {
    let channel: Vec<u8> = message.get_channel().unwrap_or_default();
    match message.get_pattern::<Option<Vec<u8>>>().ok().flatten() {
        Some(pattern) => event(&[b"pmessage", &pattern, &channel, message.get_payload_bytes()]),
        None => event(&[b"message", &channel, message.get_payload_bytes()]),
    }
}

/// One SSE event whose data is `fields` joined by commas.
fn event(fields: &[&[u8]]) -> Bytes {
    let data = fields.join(&b","[..]);
    frame(None, &String::from_utf8_lossy(&data))
}

/// The last event of a stream that ends for a reason other than the client's leaving.
fn error_event(text: &str) -> Bytes {
    frame(Some("error"), text)
}

/// `data` as an SSE event: a `data:` line per line of it (CRLF, CR and LF all end a line in SSE), then a blank line.
fn frame(name: Option<&str>, data: &str) -> Bytes {
    let mut out = String::with_capacity(data.len() + 16);
    if let Some(name) = name {
        out.push_str("event: ");
        out.push_str(name);
        out.push('\n');
    }
    for line in data.split("\r\n").flat_map(|line| line.split(['\r', '\n'])) {
        out.push_str("data: ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_percent_decoded_path_segments() {
        assert_eq!(names_in_path("/subscribe/chat", Kind::Channels).unwrap(), vec![b"chat".to_vec()]);
        assert_eq!(
            names_in_path("/psubscribe/user:*/a%2Fb%20c/%FF", Kind::Patterns).unwrap(),
            vec![b"user:*".to_vec(), b"a/b c".to_vec(), vec![0xff]]
        );
        assert!(names_in_path("/subscribe/", Kind::Channels).unwrap_err().contains("POST /subscribe/<channel>"));
        assert!(names_in_path("/subscribe/a//b", Kind::Channels).unwrap_err().contains("empty channel"));
        assert!(names_in_path("/psubscribe/100%", Kind::Patterns).unwrap_err().contains("%25"));
        assert!(names_in_path("/subscribe/%zz", Kind::Channels).is_err());
        let many = format!("/subscribe/{}", vec!["c"; MAX_QUEUED_EVENTS + 1].join("/"));
        assert!(names_in_path(&many, Kind::Channels).unwrap_err().contains("at most 1024 channels"));
    }

    #[test]
    fn events_are_upstash_data_lines_and_line_breaks_split_them() {
        assert_eq!(event(&[b"subscribe", b"chat", b"1"]), "data: subscribe,chat,1\n\n");
        assert_eq!(event(&[b"pmessage", b"c*", b"chat", b"{\"a\":[1,2]}"]), "data: pmessage,c*,chat,{\"a\":[1,2]}\n\n");
        assert_eq!(
            event(&[b"message", b"c", b"one\ntwo\r\nthree\rfour"]),
            "data: message,c,one\ndata: two\ndata: three\ndata: four\n\n"
        );
        assert_eq!(event(&[b"message", b"c", b"\xffx"]), "data: message,c,\u{fffd}x\n\n");
        assert_eq!(error_event("ERR gone"), "event: error\ndata: ERR gone\n\n");
    }

    #[tokio::test]
    async fn a_queue_takes_events_until_its_count_or_bytes_run_out_and_keeps_a_slot_for_the_last() {
        let (sender, mut receiver) = mpsc::channel(4);
        let queue = Queue { sender, queued: Arc::new(AtomicUsize::new(0)), budget: 10 };
        // Alone, an event larger than the budget is taken; behind it, nothing more.
        assert!(queue.offer(Bytes::from(vec![b'x'; 20])));
        assert!(!queue.offer(Bytes::from_static(b"y")));
        let taken = receiver.recv().await.unwrap();
        queue.queued.fetch_sub(taken.len(), Ordering::AcqRel);
        assert!(queue.offer(Bytes::from_static(b"12345")));
        assert!(queue.offer(Bytes::from_static(b"12345")));
        assert!(!queue.offer(Bytes::from_static(b"1")), "over the byte budget");
        let (sender, _receiver) = mpsc::channel(3);
        let queue = Queue { sender, queued: Arc::new(AtomicUsize::new(0)), budget: 1000 };
        assert!(queue.offer(Bytes::from_static(b"a")));
        assert!(queue.offer(Bytes::from_static(b"b")));
        assert!(!queue.offer(Bytes::from_static(b"c")), "the last slot is the final event's");
        assert!(queue.sender.try_send(error_event("ERR x")).is_ok());
    }
}
