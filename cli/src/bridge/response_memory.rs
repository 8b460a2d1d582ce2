//! The memory the bridge holds for large responses, bounded across all requests together.
//!
//! The reply cap ([`super::reply_cap`]) bounds what one request holds, but not how many requests hold it at once: a
//! response stays in memory until its client has read it, and a client that reads slowly, or not at all, keeps it
//! there. 60 connections asking for a 4 MiB value without reading the answers held 60 × 4 MiB.
//!
//! So every response larger than [`SMALL_RESPONSE`] takes its size from one budget shared by all requests
//! (`--max-response-memory`) before it is sent, and gives it back when hyper has taken its last byte. A response that
//! finds the budget taken by others is answered HTTP 429 with `Retry-After` instead (not 503: a client may take a
//! 503 for an outage and fail open, and this is no outage); one larger than the whole budget, HTTP 413. While it is
//! sent, a large response goes out in copies of [`CHUNK`] bytes, so that what hyper buffers for a connection (some
//! 400 KiB at most) never keeps the whole response alive after its budget was given back.
//!
//! Small responses, every limiter decision among them, pass untouched: hyper's buffer bounds them per connection. A
//! client that stops reading altogether is cut off after [`super::serving::WRITE_STALL_TIMEOUT`], which frees
//! what its response held.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body::{Frame, SizeHint};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::Failure;

/// Responses up to this size are not counted.
pub const SMALL_RESPONSE: u64 = 64 * 1024;

/// How much of a large response is handed to hyper at a time.
const CHUNK: usize = 16 * 1024;

/// The budget: a semaphore of KiB, so that any budget a machine can hold fits its `u32` permits.
pub(super) struct ResponseMemory {
    kib: Arc<Semaphore>,
    budget_bytes: u64,
}

impl ResponseMemory {
    pub(super) fn new(budget_bytes: u64) -> Self {
        let kib = usize::try_from(budget_bytes.div_ceil(1024))
            .unwrap_or(usize::MAX)
            .min(Semaphore::MAX_PERMITS)
            .min(u32::MAX as usize);
        ResponseMemory {
            kib: Arc::new(Semaphore::new(kib)),
            budget_bytes,
        }
    }
}

/// Middleware: holds each large response to the budget (see the module's docs).
pub(super) async fn hold(State(memory): State<Arc<ResponseMemory>>, request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    // Event streams have no size; what waits for each subscriber is bounded by subscribe.rs.
    let Some(size) = http_body::Body::size_hint(response.body()).exact() else {
        return response;
    };
    if size <= SMALL_RESPONSE {
        return response;
    }
    if size > memory.budget_bytes {
        return Failure::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the response is {size} bytes, more than the bridge may hold for responses at once \
                 (--max-response-memory, EDGELIMIT_MAX_RESPONSE_MEMORY, {} bytes): read less at once or raise it",
                memory.budget_bytes
            ),
        )
        .into_response();
    }
    // Within the budget, which fits u32 KiB, so the size does too.
    let kib = u32::try_from(size.div_ceil(1024)).unwrap_or(u32::MAX);
    let Ok(permit) = memory.kib.clone().try_acquire_many_owned(kib) else {
        let mut busy = Failure::new(
            StatusCode::TOO_MANY_REQUESTS,
            format!(
                "the bridge holds all it may for responses that other clients are still reading \
                 (--max-response-memory, {} bytes); this {size}-byte response was not sent: retry in a second",
                memory.budget_bytes
            ),
        )
        .into_response();
        busy.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        return busy;
    };
    let (parts, body) = response.into_parts();
    // A body with an exact size is whole in memory already (axum's Json): collecting it copies nothing.
    match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => Response::from_parts(
            parts,
            Body::new(Held {
                bytes,
                at: 0,
                _permit: Some(permit),
            }),
        ),
        Err(_) => Failure::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the bridge could not read back a response it made (a bug)",
        )
        .into_response(),
    }
}

/// A large response being sent, holding its share of the budget until its last chunk is taken.
struct Held {
    bytes: Bytes,
    at: usize,
    _permit: Option<OwnedSemaphorePermit>,
}

impl http_body::Body for Held {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
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
        let memory = ResponseMemory::new(100 * 1024);
        let permit = memory.kib.clone().try_acquire_many_owned(70).unwrap();
        let bytes = Bytes::from((0..70_000u32).map(|i| i as u8).collect::<Vec<u8>>());
        let mut body = Held {
            bytes: bytes.clone(),
            at: 0,
            _permit: Some(permit),
        };
        let mut collected = Vec::new();
        while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
            let data = frame.unwrap().into_data().unwrap();
            assert!(data.len() <= CHUNK);
            collected.extend_from_slice(&data);
        }
        assert_eq!(collected, bytes);
        assert_eq!(
            memory.kib.available_permits(),
            100,
            "given back at the end, before the body is dropped"
        );
        assert!(body.is_end_stream());
    }
}
