//! Paths that many calls never take (an option of some configurations, a rare reply), compiled apart on wasm.
//!
//! V8 compiles a wasm function on its first call, so a Worker's cold start pays for the code its first decision
//! runs, and an awaited `async fn` is compiled into its caller's state machine whether it runs or not.
//! [`out_of_line`] boxes such a future on wasm, making it a function of its own; natively it is the future itself
//! (nothing compiles at run time, and the caller stays `Send`).

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
