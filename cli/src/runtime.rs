//! How the `edgelimit` binary runs the bridge: its async runtime's worker threads, and its allocator. The
//! benchmarks' process (whose bridge runs in it) and their hello-world baseline run the same way, so that
//! "bridge / hello-world" compares one stack.

use std::io;

use tokio::runtime::Runtime;

/// mimalloc instead of glibc's malloc, for every binary that links this crate (the `edgelimit` binary, the
/// benchmarks, the tests' in-process bridges): declared once, here, so that none runs the bridge on another
/// allocator. glibc's malloc and free were 16 % of the bridge's CPU time per request (each request allocates in
/// hyper, axum, the handler and the Redis client); with mimalloc the bridge spends 15 % less CPU per request on two
/// worker threads, up to 12 % less on one (bench/PROFILE.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A multi-threaded runtime with `threads` worker threads, or [`default_threads`] of them.
pub fn build(threads: Option<u16>) -> io::Result<Runtime> {
    let threads = threads.map_or_else(default_threads, usize::from);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("could not start the runtime's {threads} worker threads: {e}"),
            )
        })
}

/// Half the machine's cores, at least one. The bridge forwards every request to one Redis, which is
/// single-threaded and usually on the same host as the bridge (the dev stack, a self-hosted box), as its clients
/// often are. Worker threads beyond what the load needs cost cross-thread wake-ups (a request's connection task
/// and the Redis connection's task meet on different threads) and take cores from Redis: on two cores, one worker
/// thread spends about a third less CPU per request than two (bench/PROFILE.md). `--threads` (or
/// `EDGELIMIT_THREADS`) sets it for a host of the bridge's own.
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
