// The package's public API: `Ratelimit` and its limiter factories, over the wasm core. Everything that decides —
// reading the options, the scripts, the protocol, the block cache, the failure policy — runs in Rust
// (src/ratelimit, src/wasm); this layer only gives it the shape JS users know from @upstash/ratelimit.
// Types and docs: index.d.ts.
import { RatelimitCore, RestClient } from "./core.js";

export { RestClient };

/** A limiter description: what the factories return and what `limiter`/`limitAll` take. */
function limiter(algorithm, limit, interval, rate) {
  return rate === undefined ? { algorithm, limit, interval } : { algorithm, limit, interval, rate };
}

export class Ratelimit {
  #core;

  constructor(config) {
    this.#core = new RatelimitCore(config);
  }

  /** Exact sliding log: at most `limit` permits in any `interval`. */
  static slidingLog(limit, interval) {
    return limiter("sliding_log", limit, interval);
  }

  /** At most `limit` permits per aligned window of `window`. */
  static fixedWindow(limit, window) {
    return limiter("fixed_window", limit, window);
  }

  /** About `limit` permits per sliding `window`, by the weighted two-window approximation. */
  static slidingWindow(limit, window) {
    return limiter("sliding_window", limit, window);
  }

  /** A bucket of `maxTokens`, refilled continuously by `refillRate` per `interval` (@upstash/ratelimit's order). */
  static tokenBucket(refillRate, interval, maxTokens) {
    // The rate is always sent (null when missing, which the core refuses), never left to default to maxTokens.
    return limiter("token_bucket", maxTokens, interval, refillRate ?? null);
  }

  /** GCRA: `rate` per `interval` sustained, bursts of up to `burst` (default `rate`). */
  static gcra(rate, interval, burst = rate) {
    return limiter("gcra", burst, interval, rate);
  }

  /**
   * At most `limit` permits held at once: a grant is a lease, given back with `release(identifier, receipt)` when the
   * work is done, or freed by itself `leaseTimeout` after it was granted (so a crashed holder leaks nothing).
   */
  static concurrency(limit, leaseTimeout) {
    return limiter("concurrency", limit, leaseTimeout);
  }

  limit(identifier, options) {
    return this.#core.limit(identifier, options);
  }

  limitAll(identifier, limiters, options) {
    return this.#core.limitAll(identifier, limiters, options);
  }

  blockUntilReady(identifier, timeout, options) {
    return this.#core.blockUntilReady(identifier, timeout, options);
  }

  refund(identifier, receipt, limiters) {
    return this.#core.refund(identifier, receipt, limiters);
  }

  release(identifier, receipt, limiters) {
    return this.#core.release(identifier, receipt, limiters);
  }

  getRemaining(identifier) {
    return this.#core.getRemaining(identifier);
  }

  state(identifier) {
    return this.#core.state(identifier);
  }

  reset(identifier) {
    return this.#core.reset(identifier);
  }

  rateLimiter(name, options) {
    return this.#core.rateLimiter(name, options);
  }
}
