//! The memory the bridge holds for large requests and responses, bounded across all requests together.
//!
//! The body and reply caps bound one request; this budget (`--max-memory-in-flight`) bounds all of them at once. A
//! body above [`SMALL`] takes [`PARSED_REQUEST_FACTOR`] times its size before anything runs and keeps it for its
//! response, which takes more only where larger, until hyper has its last byte. Refused: HTTP 429 with `Retry-After`
//! (not 503, which clients may take for an outage and fail open), or 413 when larger than the whole budget.
//! The measurements behind it: docs/design/bridge-memory.md.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body::{Frame, SizeHint};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::Failure;

/// How long a request's body may take to arrive once its head is in: a client trickling bodies holds no
/// connection longer.
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Requests and responses up to this size are not counted.
pub const SMALL: u64 = 64 * 1024;

/// How many times its body's size a request may take while it is parsed into JSON and words.
pub const PARSED_REQUEST_FACTOR: u64 = 10;

/// How much of a large response is handed to hyper at a time.
const CHUNK: usize = 16 * 1024;

/// The budget: a semaphore of KiB, so that any budget a machine can hold fits its `u32` permits.
pub(super) struct MemoryBudget {
    kib: Arc<Semaphore>,
    total_kib: usize,
    budget_bytes: u64,
    max_request_bytes: u64,
}

impl MemoryBudget {
    /// A budget of `budget_bytes`, for requests of at most `max_request_bytes` (the body cap).
    pub(super) fn new(budget_bytes: u64, max_request_bytes: usize) -> Self {
        let kib = usize::try_from(budget_bytes.div_ceil(1024))
            .unwrap_or(usize::MAX)
            .min(Semaphore::MAX_PERMITS)
            .min(u32::MAX as usize);
        MemoryBudget {
            kib: Arc::new(Semaphore::new(kib)),
            total_kib: kib,
            budget_bytes,
            max_request_bytes: u64::try_from(max_request_bytes).unwrap_or(u64::MAX),
        }
    }

    /// The bytes held now, to the KiB.
    pub(super) fn in_use(&self) -> u64 {
        (self.total_kib.saturating_sub(self.kib.available_permits()) as u64) * 1024
    }

    /// A share of `bytes` for `what` ("request", "response"), or the answer that replaces it: 413 when more than the
    /// whole budget, 429 when others hold what it needs. Nothing when it is small.
    fn share(&self, bytes: u64, what: &str, then: &str) -> Result<Option<OwnedSemaphorePermit>, Failure> {
        if bytes <= SMALL {
            return Ok(None);
        }
        if bytes > self.budget_bytes {
            return Err(Failure::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "this {what} needs {bytes} bytes of the bridge's memory, more than all it may hold at once \
                     (--max-memory-in-flight, EDGELIMIT_MAX_MEMORY_IN_FLIGHT, {} bytes): send or read less at once, \
                     or raise it ({then})",
                    self.budget_bytes
                ),
            ));
        }
        // Within the budget, whose KiB fit u32, so these do too.
        let kib = u32::try_from(bytes.div_ceil(1024)).unwrap_or(u32::MAX);
        match self.kib.clone().try_acquire_many_owned(kib) {
            Ok(permit) => Ok(Some(permit)),
            Err(_) => Err(Failure::new(
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "the bridge holds all the memory it may for large requests and responses of other clients \
                     (--max-memory-in-flight, {} bytes); this {what} needs {bytes} bytes: {then}",
                    self.budget_bytes
                ),
            )),
        }
    }

    /// What a request may take while it is read and parsed: its announced size (or the body cap when chunked) times
    /// [`PARSED_REQUEST_FACTOR`], never more than the body cap allows.
    fn request_bytes(&self, request: &Request) -> u64 {
        let body = http_body::Body::size_hint(request.body());
        body.exact().unwrap_or(self.max_request_bytes).min(self.max_request_bytes).saturating_mul(PARSED_REQUEST_FACTOR)
    }
}

/// Middleware: holds each large request, then each large response, to the budget. A request's body is read here,
/// whole, within [`BODY_READ_TIMEOUT`]; one announced above the body cap is refused before any of it is read.
pub(super) async fn hold(State(memory): State<Arc<MemoryBudget>>, request: Request, next: Next) -> Response {
    let announced = http_body::Body::size_hint(request.body()).lower();
    if announced > memory.max_request_bytes {
        return closing(Failure::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the request body announces {announced} bytes, more than the bridge accepts ({}, --max-request-bytes)",
                memory.max_request_bytes
            ),
        ));
    }
    let request_bytes = memory.request_bytes(&request);
    let request_share = match memory.share(request_bytes, "request", "retry in a second") {
        Ok(share) => share,
        Err(refusal) => {
            discard(request.into_body(), memory.max_request_bytes).await;
            return refusal.into_response();
        }
    };
    let (parts, body) = request.into_parts();
    let limit = usize::try_from(memory.max_request_bytes).unwrap_or(usize::MAX);
    let body = match tokio::time::timeout(BODY_READ_TIMEOUT, axum::body::to_bytes(body, limit)).await {
        Ok(Ok(body)) => body,
        Ok(Err(e)) if over_limit(&e) => {
            let cap = memory.max_request_bytes;
            let message = format!("the request body is larger than the bridge accepts ({cap}, --max-request-bytes)");
            return closing(Failure::new(StatusCode::PAYLOAD_TOO_LARGE, message));
        }
        Ok(Err(e)) => return Failure::bad_request(format!("could not read the request body: {e}")).into_response(),
        Err(_) => {
            return closing(Failure::new(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the request body did not arrive within {} s of its head: send it whole",
                    BODY_READ_TIMEOUT.as_secs()
                ),
            ))
        }
    };
    let response = next.run(Request::from_parts(parts, Body::from(body))).await;
    // Event streams have no size; what waits for each subscriber is bounded by subscribe.rs.
    let Some(size) = http_body::Body::size_hint(response.body()).exact() else {
        return response;
    };
    // The request's share goes on to its response, which takes more only where larger: a pipeline of decisions
    // (whose answer is smaller than its request) is never refused after its permits were spent.
    let held = if request_share.is_some() { request_bytes } else { 0 };
    let extra = match memory.share(
        size.saturating_sub(held),
        "response",
        "its commands ran in Redis and only the response was discarded: retry only what is safe to run twice",
    ) {
        Ok(extra) => extra,
        Err(refusal) => return refusal.into_response(),
    };
    let permit = match (request_share, extra) {
        (Some(mut request), Some(extra)) => {
            request.merge(extra);
            request
        }
        (Some(permit), None) | (None, Some(permit)) => permit,
        // Nothing to hold: a small response (the request's share, if any, is given back now).
        (None, None) => return response,
    };
    let (parts, body) = response.into_parts();
    // A body with an exact size is whole in memory already (axum's Json): collecting it copies nothing.
    match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => Response::from_parts(parts, Body::new(Held::new(bytes, permit))),
        Err(_) => {
            Failure::new(StatusCode::INTERNAL_SERVER_ERROR, "the bridge could not read back a response it made (a bug)")
                .into_response()
        }
    }
}

/// Whether reading a body failed on its length limit (ours, or axum's `DefaultBodyLimit` under it).
fn over_limit(error: &axum::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(error) = cause {
        if error.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        cause = error.source();
    }
    false
}

/// `failure`'s answer, closing the connection: the rest of the request's body is never read.
fn closing(failure: Failure) -> Response {
    let mut response = failure.into_response();
    response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// Reads a refused request's body (up to the body cap) and discards it: answering before it is read would make the
/// client see a reset connection, not the refusal, and may take that for an outage.
async fn discard(body: Body, max_bytes: u64) {
    use futures_util::StreamExt;
    let mut frames = body.into_data_stream();
    let mut read = 0u64;
    while let Some(Ok(frame)) = frames.next().await {
        read = read.saturating_add(frame.len() as u64);
        if read > max_bytes {
            return;
        }
    }
}

/// A large response being sent, holding its share of the budget until its last chunk is taken, or until a client
/// reading slower than [`MIN_READ_RATE`] runs out of time.
struct Held {
    bytes: Bytes,
    at: usize,
    deadline: Instant,
    _permit: Option<OwnedSemaphorePermit>,
}

/// The slowest a client may read a large response (see [`Held`]).
pub const MIN_READ_RATE: u64 = 1 << 20;

impl Held {
    fn new(bytes: Bytes, permit: OwnedSemaphorePermit) -> Self {
        let reading = Duration::from_secs((bytes.len() as u64).div_ceil(MIN_READ_RATE));
        Held {
            deadline: Instant::now() + super::serving::WRITE_STALL_TIMEOUT + reading,
            bytes,
            at: 0,
            _permit: Some(permit),
        }
    }
}

impl http_body::Body for Held {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if Instant::now() > this.deadline && this.at < this.bytes.len() {
            // hyper closes the connection, which drops this body and its share.
            return Poll::Ready(Some(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the client read a large response too slowly",
            ))));
        }
        let end = this.bytes.len().min(this.at + CHUNK);
        if this.at == end {
            // The response and its budget go as soon as hyper has the last of it, not when the connection moves on.
            this.bytes = Bytes::new();
            this.at = 0;
            this._permit = None;
            return Poll::Ready(None);
        }
        // A copy: a slice would keep the whole response alive for as long as hyper holds the slice.
        let chunk = Bytes::copy_from_slice(&this.bytes[this.at..end]);
        this.at = end;
        Poll::Ready(Some(Ok(Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        self.at == self.bytes.len()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact((self.bytes.len() - self.at) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body::Body as _;

    #[tokio::test]
    async fn a_held_body_yields_its_bytes_in_copied_chunks_and_frees_the_budget_at_its_end() {
        let memory = MemoryBudget::new(100 * 1024, 1 << 20);
        let permit = memory.kib.clone().try_acquire_many_owned(70).unwrap();
        let bytes = Bytes::from((0..70_000u32).map(|i| i as u8).collect::<Vec<u8>>());
        let mut body = Held::new(bytes.clone(), permit);
        let mut collected = Vec::new();
        while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
            let data = frame.unwrap().into_data().unwrap();
            assert!(data.len() <= CHUNK);
            collected.extend_from_slice(&data);
        }
        assert_eq!(collected, bytes);
        assert_eq!(memory.kib.available_permits(), 100, "given back at the end, before the body is dropped");
        assert!(body.is_end_stream());
    }
}
