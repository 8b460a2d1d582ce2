// The npm package's decisions, built in JS for src/wasm/ratelimit.rs. Why not `Reflect.set` from Rust, one property
// at a time: each call crosses into JS, decodes the property's name from wasm memory and goes through
// wasm-bindgen's error wrapper, and objects grown key by key from Rust take a slower shape. An object literal here
// has one shape, and a decision costs one call (bench/coalescing.mjs: about a fifth of the client's CPU per
// decision went to building results that way).

/** A decision: `{success, limit, remaining, reset, retryAfter}`, plus `receipt` for a grant that has one. */
export function decision(success, limit, remaining, reset, retryAfter, receipt) {
  return receipt === undefined
    ? { success, limit, remaining, reset, retryAfter }
    : { success, limit, remaining, reset, retryAfter, receipt };
}

/** An outcome: `decision`'s fields, then `reason`, each limit's own decision in `results`, and `error` when given. */
export function outcome(success, limit, remaining, reset, retryAfter, receipt, reason, results, error) {
  const result =
    receipt === undefined
      ? { success, limit, remaining, reset, retryAfter, reason, results }
      : { success, limit, remaining, reset, retryAfter, receipt, reason, results };
  if (error !== undefined) result.error = error;
  return result;
}
