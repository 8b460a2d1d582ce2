//! Ids unique per process (a random prefix and a counter) for the Redisson layout's grants, and unguessable ids for
//! the family's logged grants and lent leases, whose receipts are all a refund needs. Two equal members in one zset
//! would collapse and under-count; the scripts also guard against collisions (`ZADD NX`), so 64 bits suffice.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

static PREFIX: OnceLock<u64> = OnceLock::new();
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// The next id, e.g. `3f9a…:17`.
pub fn next() -> String {
    let prefix = PREFIX.get_or_init(random_u64);
    format!("{prefix:016x}:{}", COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// An id no one can work out from the ids before it: one holder must not forge another's receipt.
#[cfg(not(target_arch = "wasm32"))]
pub fn unguessable_u64() -> u64 {
    use std::hash::BuildHasher;
    // SipHash keyed from the OS once per process, over the counter: unpredictable without the keys.
    static KEYS: OnceLock<std::collections::hash_map::RandomState> = OnceLock::new();
    (KEYS.get_or_init(Default::default)).hash_one(COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// An unguessable id (see the native one): 64 bits of `crypto.getRandomValues` (in a Worker, only within a
/// request, where leases are lent). Not `Math.random`, whose generator can be worked out from a few outputs.
#[cfg(target_arch = "wasm32")]
pub fn unguessable_u64() -> u64 {
    let words = js_sys::Uint32Array::new_with_length(2);
    crypto_random_values(&words);
    (u64::from(words.get_index(0)) << 32) | u64::from(words.get_index(1))
}

#[cfg(target_arch = "wasm32")]
#[wasm_bindgen::prelude::wasm_bindgen]
extern "C" {
    /// `crypto.getRandomValues(array)`.
    #[wasm_bindgen(js_namespace = crypto, js_name = getRandomValues)]
    fn crypto_random_values(array: &js_sys::Uint32Array);
}

#[cfg(target_arch = "wasm32")]
fn random_u64() -> u64 {
    // Math.random is allowed everywhere, including a Worker's global scope.
    (js_sys::Math::random() * 9_007_199_254_740_992.0) as u64
}

#[cfg(not(target_arch = "wasm32"))]
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    // RandomState is seeded from the OS per process; mixing in the time separates processes further.
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(web_time::SystemTime::now().duration_since(web_time::UNIX_EPOCH).unwrap_or_default().as_nanos());
    hasher.finish()
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_are_unique_within_a_process() {
        let ids: std::collections::HashSet<String> = (0..1000).map(|_| super::next()).collect();
        assert_eq!(ids.len(), 1000);
        let numbers: std::collections::HashSet<u64> = (0..1000).map(|_| super::unguessable_u64()).collect();
        assert_eq!(numbers.len(), 1000);
    }
}
