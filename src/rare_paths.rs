//! Paths that many calls never take (an option of some configurations, a rare reply), compiled apart from the path
//! they do take.
//!
//! V8 compiles a wasm function when it is first called, and then runs it unoptimised for a while, so a Worker's
//! cold start pays for the bytes of code its first decision runs (README, "Why the wasm is this size"). An `async fn`
//! awaited inside another is inlined into the caller's state machine, and so is compiled with it whether it runs or
//! not. [`out_of_line`] boxes such a future as a trait object on wasm: its state machine becomes a function of its own,
//! compiled only when that path is taken. Natively it is the future itself (nothing is compiled at run time there, and
//! the caller's future stays `Send`).

use std::future::Future;

/// `future`, as a function of its own on wasm (see the module's doc); unchanged natively.
#[cfg(target_arch = "wasm32")]
pub(crate) fn out_of_line<'a, T>(
    future: impl Future<Output = T> + 'a,
) -> std::pin::Pin<Box<dyn Future<Output = T> + 'a>> {
    Box::pin(future)
}

/// `future`, as a function of its own on wasm (see the module's doc); unchanged natively.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn out_of_line<F: Future>(future: F) -> F {
    future
}
