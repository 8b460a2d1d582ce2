//! How the `edgelimit` binary runs the bridge: its runtime's worker threads and its allocator. The benchmarks run
//! the same way, so that their comparisons measure one stack.

use std::io;

use tokio::runtime::Runtime;

/// mimalloc for every binary that links this crate, so that none runs the bridge on another allocator: glibc's
/// malloc was a large share of the bridge's CPU per request (bench/PROFILE.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A multi-threaded runtime with `threads` worker threads, or [`default_threads`] of them.
pub fn build(threads: Option<u16>) -> io::Result<Runtime> {
    let threads = threads.map_or_else(default_threads, usize::from);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .map_err(|e| io::Error::new(e.kind(), format!("could not start the runtime's {threads} worker threads: {e}")))
}

/// Half the machine's cores, at least one: the bridge's Redis is single-threaded and often on the same host, and
/// extra worker threads cost cross-thread wake-ups and take cores from it (bench/PROFILE.md). `--threads` sets it.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |cores| (cores.get() / 2).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_least_one_thread_and_at_most_the_cores() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert!((1..=cores).contains(&default_threads()));
    }

    #[test]
    fn builds_the_runtime_it_is_asked_for() {
        let runtime = build(Some(3)).unwrap();
        assert_eq!(runtime.metrics().num_workers(), 3);
    }
}
