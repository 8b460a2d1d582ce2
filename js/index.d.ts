/**
 * edgelimit: exact distributed rate limiting for Workers, Node and browsers. Every decision is one HTTP round trip
 * to an Upstash-compatible Redis REST endpoint, where one atomic Lua script decides on the Redis server's clock.
 *
 * @example
 * ```ts
 * import { Ratelimit } from "edgelimit";
 *
 * const ratelimit = new Ratelimit({
 *   url: "http://127.0.0.1:8079",
 *   token: "dev-token",
 *   limiter: Ratelimit.slidingLog(10, "10 s"),
 * });
 * const { success, remaining, retryAfter } = await ratelimit.limit("203.0.113.7");
 * if (!success) console.log(`denied; retry in ${retryAfter} ms (${remaining} left)`);
 * ```
 *
 * @packageDocumentation
 */

/**
 * A duration with its unit: `"250ms"`, `"10 s"`, `"1m"`, `"2h"`, `"1d"` (also `sec`, `min`, `hour`, `day` and
 * plurals; fractions such as `"1.5s"`). A bare number is refused: milliseconds or seconds is exactly what a rate
 * limit must not leave to a guess. It must come to whole milliseconds, at least 1.
 */
export type Duration = `${number}${DurationUnit}` | `${number} ${DurationUnit}`;

/** The units a {@link Duration} may name. */
export type DurationUnit =
  | "ms" | "millisecond" | "milliseconds"
  | "s" | "sec" | "secs" | "second" | "seconds"
  | "m" | "min" | "mins" | "minute" | "minutes"
  | "h" | "hour" | "hours"
  | "d" | "day" | "days";

/** The algorithm names limiter descriptions carry (the factories fill them in). */
export type Algorithm = "sliding_log" | "fixed_window" | "sliding_window" | "token_bucket" | "gcra" | "concurrency";

/**
 * A limit, as the factories of {@link Ratelimit} build it. Plain data: spread it to rename it, e.g.
 * `{ ...Ratelimit.fixedWindow(1000, "1 h"), name: "hourly" }`.
 */
export interface Quota {
  /** The algorithm. */
  algorithm: Algorithm;
  /** Permits per interval, or the capacity/burst of a token bucket or GCRA. A whole number from 1 to 2^32 − 1. */
  limit: number;
  /** The window, or the refill period of a token bucket or GCRA. */
  interval: Duration;
  /** Permits refilled per interval (token bucket, GCRA). Default: `limit`. */
  rate?: number;
  /**
   * The name this limit's keys live under: `<prefix>:{<name>}:<identifier>` (see {@link RatelimitConfig.layout}).
   * Default: the algorithm and the interval, e.g. `sliding_log-10000ms`, so changing the limit keeps the state and two
   * limiters with the same algorithm and interval share it; give distinct names to keep them apart. No `{` or `}`.
   */
  name?: string;
}

/**
 * @deprecated The earlier name of {@link Quota} (what the factories build), kept so existing code compiles. Rust
 * calls the same value `Quota`; a `Limiter` there is a named handle, like a {@link Ratelimit} here.
 */
export type Limiter = Quota;

/** Options of {@link Ratelimit}. */
export interface RatelimitConfig {
  /** The REST endpoint, e.g. `https://<db>.upstash.io` or the local bridge `http://127.0.0.1:8079`. */
  url: string;
  /** The endpoint's bearer token. */
  token: string;
  /**
   * The limit every identifier is held to, or several (all must allow; a request denied by one consumes from none),
   * e.g. `[Ratelimit.slidingLog(10, "1 s"), Ratelimit.fixedWindow(1000, "1 h")]`.
   */
  limiter: Quota | Quota[];
  /** Before every key. Default `"edgelimit"`. May not contain `{` or `}`. */
  prefix?: string;
  /**
   * Where state lives in Redis:
   * - `"per-limiter"` (default): `<prefix>:{<name>}:<id>`, every identifier of a limit in one Redis Cluster slot.
   *   Right for one Redis (Upstash, the bridge over one `redis-server`).
   * - `"per-identifier"`: `<prefix>:v2{<id>}:<name>`, for a Redis Cluster: identifiers spread over its masters, and
   *   all limits of one identifier stay one atomic script.
   *
   * The two never read each other's keys: changing it starts every identifier afresh.
   */
  layout?: "per-limiter" | "per-identifier";
  /**
   * How long to wait for the store, in ms, before the request is aborted and `onError` decides. Default 1000: a rate
   * limiter must not add seconds to a request. At most 2147483647, the longest a JS timer waits; more is an
   * `EDGELIMIT_INVALID_CONFIG` error.
   */
  timeout?: number;
  /**
   * Whether calls started in the same turn of the event loop share one `/pipeline` request (default `true`, like
   * `@upstash/redis`'s auto-pipelining); each still gets its own exact decision. `false`: one HTTP request per call,
   * none waiting for the turn's others or sharing their failure.
   */
  coalesce?: boolean;
  /**
   * Reserve permits for identifiers this client sees often and answer from them with no round trip
   * (`reason: "reserved"`). The value is a reservation's length, e.g. `"500 ms"`: at most half the time a GCRA limit
   * takes to refill from empty, or half a fixed window's, sliding log's or concurrency limit's interval. For `gcra`,
   * `fixedWindow` and `slidingLog` limits, one or several (a request is answered locally when every limit has a
   * reserved permit for it; else Redis decides it under the others, all or nothing), or one `concurrency` limit
   * alone (leases lent locally; their receipts, `"<permits>:local-<id>"`, are refunded with no round trip).
   * Exact: each reserved permit may be used only within a span that keeps every window within the limit. The price:
   * permits not used within their span are lost until they free (under-admission, never over); a busy sliding log
   * admits a few percent below its limit; `remaining` from reserved permits is this client's estimate; and
   * `reset(identifier)` or a lowered limit reaches reserved permits only when their spans end.
   * Default: off, every decision asks Redis.
   */
  reserve?: string;
  /**
   * What `limit` answers when the store is unavailable: a timeout, the endpoint unreachable or answering HTTP
   * 502–504 or 520–524, Redis loading, busy, failing over, read-only or out of memory (the codes with
   * `storeUnavailable: true`, see {@link ErrorCode}):
   * - `"allow"` (default): fail open, `success: true`;
   * - `"deny"`: fail closed, `success: false`;
   * - `"throw"`: reject with the {@link EdgelimitError}.
   *
   * - `{ insurance }`: decide in this process under a local limit (see {@link Insurance}), `reason: "insurance"`.
   *
   * With `"allow"`/`"deny"` the result's `reason` is `"timeout"` or `"error"`, `error` holds the failure, and
   * `remaining`, `reset` and `retryAfter` are 0. Every other error rejects whatever this says (invalid arguments, a
   * wrong token, foreign state, an unreadable reply, …): failing open on those would pass requests by accident.
   */
  onError?: "allow" | "deny" | "throw" | Insurance;
  /**
   * The block cache: identifiers denied moments ago are denied again from memory, without a round trip, until the
   * denial's `retryAfter` has passed (`reason: "cache"`). Only requests at least as large as the one denied are
   * answered from it. `true` (default) holds up to 10 000 identifiers, a number sets the bound, `false` or `0`
   * turns it off. It lives in this `Ratelimit` object (one Worker isolate, one Node process): a `reset` made
   * elsewhere is not seen until the cached denial ends.
   */
  cache?: boolean | number;
}

/**
 * `onError: { insurance }`: while the store is unavailable (only the errors with `storeUnavailable: true`), this
 * process decides on its own, under a local limit, with the in-memory backend on the system clock; the result has
 * `reason: "insurance"` and `error` holds the store's failure. Every call still asks the store first, within
 * `timeout`, so decisions are the store's again as soon as it answers, and nothing decided locally is written to it.
 *
 * The local limit is per process, per isolate, per `Ratelimit` object, and starts afresh (it knows nothing of what
 * the store counted): state it as the global limit divided by the processes you expect, e.g. a global
 * `slidingWindow(100, "1 m")` over about 4 processes: `{ insurance: Ratelimit.slidingWindow(25, "1 m") }`.
 * Weighted permits and several limits are decided as in the store (all must allow); a request for more permits than
 * a local limit holds is denied. Local grants carry no receipt (`refund` and `release` go to the store, which never
 * saw them). A concurrency limit cannot be insured (a local lease could not be released): it is refused, and with
 * `"same"` a `limitAll` call with one gets the store's error. The block cache holds only the store's denials: one
 * cached before the outage still answers (`reason: "cache"`), a local denial is not cached. With `reserve`, permits
 * reserved before the outage are still used (`reason: "reserved"`); a call that needs the store is insured.
 * @example
 * ```ts
 * onError: { insurance: Ratelimit.slidingWindow(25, "1 m") } // global 100 per minute, about 4 processes
 * ```
 */
export interface Insurance {
  /**
   * The local limit: a limiter from a factory, an array of them (all must allow), or `"same"`: the limits the call is
   * decided under (the limiter's own, or `limitAll`'s). Not a concurrency limit.
   */
  insurance: Quota | Quota[] | "same";
}

/**
 * Options of a {@link Ratelimit} that decides in this process, with no Redis: for tests of your own code (move time
 * with `clock`) and single-process apps. Each limit is decided by the same model of its algorithm that the Redis
 * scripts are tested against, with the same results, receipts and errors. The limits are this object's alone:
 * another process, isolate or `Ratelimit` object has its own, so it is no shared limit. `reason` is `"decided"`;
 * `state` rejects (`EDGELIMIT_INVALID_ARGUMENT`), as does `rateLimiter`. `url`, `token`, `timeout`, `coalesce`,
 * `layout`, `reserve`, `onError` and `cache` are for a store and are refused (`EDGELIMIT_INVALID_CONFIG`).
 * @example
 * ```ts
 * let now = 0;
 * const ratelimit = new Ratelimit({ memory: true, limiter: Ratelimit.fixedWindow(1, "1 s"), clock: () => now });
 * await ratelimit.limit("ip"); // allowed
 * now += 1000; // the next window
 * ```
 */
export interface MemoryConfig {
  /** Decide in this process. */
  memory: true;
  /** As {@link RatelimitConfig.limiter}. */
  limiter: Quota | Quota[];
  /**
   * The time every decision reads: unix ms, a whole number from 0 (default `Date.now`). A clock that throws or
   * returns anything else rejects the call with `EDGELIMIT_INVALID_CONFIG`; it never decides.
   */
  clock?: () => number;
  /** As {@link RatelimitConfig.prefix}; the limits are this object's whatever it is. */
  prefix?: string;
}

/** Options of a single decision. */
export interface LimitOptions {
  /** Permits this request takes: a whole number from 1. Default 1. More than the limit rejects with
   * `EDGELIMIT_PERMITS_EXCEED_RATE`. */
  permits?: number;
}

/** One limit's decision. */
export interface Decision {
  /** Whether the request was allowed (for one limit of `results`: whether *that* limit allowed it). */
  success: boolean;
  /** The limit: permits per interval, or the capacity of a bucket. */
  limit: number;
  /** Permits left after this decision. */
  remaining: number;
  /** Unix time (ms, the Redis server's clock) when the limit is whole again if no request comes. */
  reset: number;
  /** Milliseconds until this request could succeed: exact, not an estimate; 0 when allowed. */
  retryAfter: number;
  /**
   * The grant's receipt, when this limit granted: `"<permits>:<mark>"`, what {@link Ratelimit.refund} takes to give
   * exactly this grant back. The mark names the grant: its time (token bucket, GCRA), its window (fixed and sliding
   * window), its id (sliding log). Absent when nothing was granted. On a {@link RatelimitResponse} deciding several
   * limits it is absent: each limit's is in its `results` entry.
   */
  receipt?: string;
}

/** What {@link Ratelimit.refund} answers. */
export interface RefundResult {
  /**
   * Whether every limit gave something back (false for one whose grant had already freed, refilled or left the
   * windows that count).
   */
  success: boolean;
  /** Each limit's standing after its refund, in order (`success`: whether that limit gave anything back). */
  results: Decision[];
}

/** What `limit` answers. Denied is a result with `success: false`, never a rejection. */
export interface RatelimitResponse extends Decision {
  /**
   * Who decided: `"decided"` (Redis), `"cache"` (the block cache, no round trip), `"reserved"` (a permit this client
   * reserved, no round trip: see the `reserve` option; under several limits also a grant that took one limit's
   * reserved permit while Redis decided the others), `"timeout"` or `"error"` (the store was unavailable and
   * `onError` decided), `"insurance"` (the store was unavailable and this process decided under `onError`'s
   * {@link Insurance} limit).
   */
  reason: "decided" | "cache" | "reserved" | "timeout" | "error" | "insurance";
  /**
   * Each limit's own decision, in the order given, when Redis took part (one whose reserved permit was taken has no
   * receipt), or each local limit's under `"insurance"` (no receipts); empty otherwise.
   */
  results: Decision[];
  /** The store's unavailability, when `onError` turned it into this result. */
  error?: EdgelimitError;
}

/**
 * The stable codes of {@link EdgelimitError}, by who must act. Only the store's unavailability may be absorbed by
 * `onError` (these errors have `storeUnavailable: true`); every other error rejects, whatever `onError` says:
 * turning it into "allowed" would let requests past the limit by accident.
 *
 * Absorbed by `onError` (the store is unavailable):
 * - `EDGELIMIT_TIMEOUT`: no reply within `timeout`;
 * - `EDGELIMIT_TRANSPORT`: the endpoint could not be reached;
 * - `EDGELIMIT_ENDPOINT`: the endpoint answered HTTP 502, 503, 504 (e.g. Redis down behind it) or 520–524
 *   (Cloudflare before it); other statuses (500 too) reject;
 * - `EDGELIMIT_UNAVAILABLE`: Redis is loading, busy or failing over;
 * - `EDGELIMIT_READONLY`: the endpoint reached a read-only replica (alert on it: if it lasts, the endpoint is
 *   misrouted).
 *
 * Always rejected:
 * - `EDGELIMIT_INVALID_CONFIG`, `EDGELIMIT_INVALID_ARGUMENT` (also a script refusing a hand-made or forged argument),
 *   `EDGELIMIT_PERMITS_EXCEED_RATE`, `EDGELIMIT_NOT_INITIALIZED`: the caller's to fix;
 * - `EDGELIMIT_TOO_LARGE`: the request was too large for the endpoint (HTTP 413);
 * - `EDGELIMIT_AUTH`: the token was refused (HTTP 401/403);
 * - `EDGELIMIT_STORE_CONFIG`: the token's Redis user may not run what the limiter needs (NOPERM, NOAUTH,
 *   WRONGPASS), or the endpoint is a Redis Cluster node that does not route (MOVED, ASK, CROSSSLOT);
 * - `EDGELIMIT_STORE_FULL`: Redis is out of memory (OOM) and cannot record a grant (denials are still answered);
 *   not absorbed, since clients that invent identifiers can fill a store and would then pass every limit;
 * - `EDGELIMIT_FOREIGN_STATE`: a limit's key holds state edgelimit did not write (WRONGTYPE), or another
 *   algorithm's (two limits sharing a name with different algorithms);
 * - `EDGELIMIT_MALFORMED_REPLY`: a reply edgelimit cannot read (a garbled answer is no proof the store is down);
 * - `EDGELIMIT_CLIENT`: the request failed in this process, not on the network: `fetch` refused it (a `TypeError` of
 *   its own, e.g. under a polluted `Object.prototype`, or a port `fetch` blocks), or failed in a way not known to be
 *   the network's;
 * - `EDGELIMIT_REDIS`: any other Redis error.
 */
export type ErrorCode =
  | "EDGELIMIT_INVALID_CONFIG"
  | "EDGELIMIT_INVALID_ARGUMENT"
  | "EDGELIMIT_NOT_INITIALIZED"
  | "EDGELIMIT_PERMITS_EXCEED_RATE"
  | "EDGELIMIT_AUTH"
  | "EDGELIMIT_TIMEOUT"
  | "EDGELIMIT_TRANSPORT"
  | "EDGELIMIT_CLIENT"
  | "EDGELIMIT_ENDPOINT"
  | "EDGELIMIT_TOO_LARGE"
  | "EDGELIMIT_UNAVAILABLE"
  | "EDGELIMIT_READONLY"
  | "EDGELIMIT_STORE_CONFIG"
  | "EDGELIMIT_STORE_FULL"
  | "EDGELIMIT_FOREIGN_STATE"
  | "EDGELIMIT_REDIS"
  | "EDGELIMIT_MALFORMED_REPLY";

/** Every error the package throws or rejects with: an `Error` named `EdgelimitError` with a stable `code`. */
export interface EdgelimitError extends Error {
  name: "EdgelimitError";
  /** Branch on this, not on the message. */
  code: ErrorCode;
  /** True for the errors `onError` may absorb: the store was unavailable (see {@link ErrorCode}). */
  storeUnavailable: boolean;
}

/**
 * A rate limiter over an Upstash-compatible Redis REST endpoint. Familiar to `@upstash/ratelimit` users, more exact:
 * the Redis server's clock, no over-admission, exact `retryAfter`.
 */
export declare class Ratelimit {
  /**
   * @throws {@link EdgelimitError} `EDGELIMIT_INVALID_CONFIG` for an unusable option (a missing URL, a limit of 0, a
   * duration without a unit), naming the option.
   */
  constructor(config: RatelimitConfig | MemoryConfig);

  /**
   * Exact sliding log: at most `limit` permits in any `interval`-long span; a permit comes back exactly `interval`
   * after it was granted. Memory grows with the permits in the window.
   * @example Ratelimit.slidingLog(10, "1 s")
   */
  static slidingLog(limit: number, interval: Duration): Quota;

  /**
   * At most `limit` permits per aligned window. Cheapest; allows up to 2 × limit across a window boundary.
   * @example Ratelimit.fixedWindow(100, "1 m")
   */
  static fixedWindow(limit: number, window: Duration): Quota;

  /**
   * About `limit` permits per sliding window, by weighting the previous window: O(1) memory, exact under steady
   * traffic, up to nearly 2 × limit for a burst timed at a window's end.
   * @example Ratelimit.slidingWindow(100, "1 m")
   */
  static slidingWindow(limit: number, window: Duration): Quota;

  /**
   * A bucket of `maxTokens` (starts full) refilled continuously by `refillRate` tokens per `interval` (the argument
   * order of `@upstash/ratelimit`).
   * @example Ratelimit.tokenBucket(5, "1 s", 20) // bursts of 20, then 5 per second
   */
  static tokenBucket(refillRate: number, interval: Duration, maxTokens: number): Quota;

  /**
   * GCRA: `rate` per `interval` sustained, bursts of up to `burst` (default `rate`). Decides exactly as a token
   * bucket with the same numbers, with one timestamp per key.
   * @example Ratelimit.gcra(10, "1 s", 20)
   */
  static gcra(rate: number, interval: Duration, burst?: number): Quota;

  /**
   * At most `limit` permits held at once (Stripe's "N in flight"): a grant is a lease, its `receipt` the lease.
   * Give it back with {@link Ratelimit.release} when the work is done; a lease not given back frees by itself
   * `leaseTimeout` after it was granted, so a crashed holder cannot leak capacity. A denial's `retryAfter` is an
   * upper bound (holders may give back sooner).
   * @example const lease = await ratelimit.limit("upload"); try { … } finally { await ratelimit.release("upload", lease.receipt!); }
   */
  static concurrency(limit: number, leaseTimeout: Duration): Quota;

  /**
   * Takes `permits` for `identifier` if every limit allows it now. One round trip, or none when the block cache
   * knows the answer.
   * @param identifier Whose budget: an IP, a user id, an API key. Any string works and is exact: up to 200 bytes of
   *   text not starting with `#` is its own key, anything else (longer, `#…`, lone surrogates) is keyed by the
   *   SHA-256 of its exact UTF-16 (so `"\uD800"` and `"\uFFFD"` differ). A non-string rejects with
   *   `EDGELIMIT_INVALID_ARGUMENT` before any request.
   * @returns The decision; denied is `success: false` with the exact `retryAfter`.
   * @throws {@link EdgelimitError} for invalid arguments, permits above the limit, a wrong token, and (with
   * `onError: "throw"`) store failures.
   */
  limit(identifier: string, options?: LimitOptions): Promise<RatelimitResponse>;

  /**
   * Takes `permits` for `identifier` under every one of `limiters` (instead of the configured ones), all or nothing,
   * in one round trip: a request denied by one limit consumes from none. `results` has each limit's decision.
   * @example await ratelimit.limitAll(ip, [Ratelimit.slidingLog(10, "1 s"), Ratelimit.fixedWindow(1000, "1 h")])
   */
  limitAll(identifier: string, limiters: Quota[], options?: LimitOptions): Promise<RatelimitResponse>;

  /**
   * Takes `permits` for `identifier`, waiting each denial's exact `retryAfter`, for at most `timeout` ms. Resolves
   * with the last result: allowed, denied when the time ran out, or the `onError` answer as soon as the store fails.
   */
  blockUntilReady(identifier: string, timeout: number, options?: LimitOptions): Promise<RatelimitResponse>;

  /**
   * Gives back a grant, e.g. when the work it paid for failed: what it took and its limit's rule still allows, never
   * more (token bucket, GCRA: the part not refilled since; fixed window: while its window is current; sliding window:
   * while its window is current or the previous one; sliding log: while it is in the window). Sent once, never
   * retried after a timeout; a receipt is good for one refund. Refund only receipts your own code kept: token bucket,
   * GCRA and window receipts are not signed or tied to an identifier, so a hand-written one gives back what it names,
   * up to the limit; sliding-log and concurrency receipts name a logged grant and cannot be made up.
   * @param receipt The response's `receipt` (one limit), or every `results[i].receipt`, one per limit, in order.
   * @param limiters The limiters `limitAll` was given, when the grant came from `limitAll`.
   * @throws {@link EdgelimitError} `EDGELIMIT_INVALID_ARGUMENT` for a receipt no grant of the limit could have
   * returned (another form, more permits than the limit, a time or window after the server's clock), before anything
   * is written; never absorbed by `onError`.
   * @example
   * ```ts
   * const result = await ratelimit.limit(ip);
   * if (result.success && !(await work())) await ratelimit.refund(ip, result.receipt!);
   * ```
   */
  refund(identifier: string, receipt: string | string[], limiters?: Quota[]): Promise<RefundResult>;

  /**
   * Ends the leases of a grant whose work is done: of its receipts (taken as {@link Ratelimit.refund} takes them),
   * only the concurrency limits' are given back; the other limits go on counting the grant, as its request ran
   * (refunding those too would let later requests past them). `results` are the concurrency limits', in order.
   * @throws {@link EdgelimitError} `EDGELIMIT_INVALID_ARGUMENT` when no limit is a concurrency limit, and as `refund`.
   * @example
   * ```ts
   * const ratelimit = new Ratelimit({ url, token, limiter: [Ratelimit.concurrency(2, "30 s"), Ratelimit.slidingLog(3, "1 m")] });
   * const result = await ratelimit.limit(user);
   * if (result.success) try { await work(); } finally { await ratelimit.release(user, result.results.map((r) => r.receipt!)); }
   * ```
   */
  release(identifier: string, receipt: string | string[], limiters?: Quota[]): Promise<RefundResult>;

  /** What is left for `identifier` now, taking nothing: the limit with the fewest permits left. */
  getRemaining(identifier: string): Promise<{ remaining: number; reset: number; limit: number }>;

  /**
   * `identifier`'s state under every limit, as Redis holds it: one script reads the server's clock and every key at
   * one moment, in one round trip, writing nothing. Shown as the next decision would see it: a window that ended
   * counts nothing, a bucket has refilled, freed permits are gone. For dashboards and the playground; deciding
   * needs none of it.
   * @example
   * ```ts
   * const [log] = await ratelimit.state("203.0.113.7");
   * if (log.algorithm === "sliding_log") log.grants.forEach((g) => console.log(g.permits, "free at", g.freesAt));
   * ```
   */
  state(identifier: string): Promise<LimitState[]>;

  /** Forgets `identifier`'s state under every limit (and its cached denials). Resolves to whether there was any. */
  reset(identifier: string): Promise<boolean>;

  /**
   * A handle on the named sliding log `name`, Redisson's `RRateLimiter` layout: a Java service using Redisson's
   * `getRateLimiter(name)` and this handle share one limit. Set its rate once (`trySetRate`), then acquire.
   * @param options.clientId The budget this handle uses in `"perClient"` mode. Default `"edgelimit"`.
   */
  rateLimiter(name: string, options?: { clientId?: string }): RateLimiter;
}

/** What every {@link LimitState} has: the limit, its key and the moment read. */
export interface LimitStateBase {
  /** The limit's name (its keys live under `<prefix>:{<name>}`). */
  name: string;
  /** Permits per interval, or the capacity/burst of a token bucket or GCRA. */
  limit: number;
  /** The interval in ms. */
  interval: number;
  /** Permits refilled per interval (token bucket, GCRA; equal to `limit` for the others). */
  rate: number;
  /** The Redis key read. */
  key: string;
  /** The moment read: unix ms on the Redis server's clock. */
  now: number;
  /** Unix ms when the key expires; `null` when there is no key (a fresh identifier) or it never expires. */
  expiresAt: number | null;
  /** The key's value as stored, for the algorithms that keep a string; `null` for a sliding log or no key. */
  stored: string | null;
}

/** A grant in a sliding log: permits taken together, freeing together. */
export interface HeldGrant {
  /** The grant's id, sealed (16 hex digits of the SHA-1 of its receipt's id): reading the state cannot refund it. */
  id: string;
  /** Permits it holds. */
  permits: number;
  /** Unix ms (server clock) when they free: the grant's time plus the interval. */
  freesAt: number;
}

/**
 * One limit's state, by algorithm: see {@link Ratelimit.state}.
 * - `sliding_log`: `held` permits, and the `grants` holding them, soonest-freeing first (up to 1000 permits listed);
 * - `fixed_window`: the current window and its `count`;
 * - `sliding_window`: the `current` and `previous` window counts, and `weightedCount`, what the limit is held
 *   against (the previous count weighted by how much of it the sliding window still covers, plus the current);
 * - `token_bucket`: `tokens` now (fractional: the bucket refills continuously);
 * - `gcra`: the theoretical arrival time `tat` (unix ms, fractional; `now` when the limit is whole) and the `tokens`
 *   a burst could take now.
 */
export type LimitState = LimitStateBase &
  (
    | { algorithm: "sliding_log" | "concurrency"; held: number; grants: HeldGrant[] }
    | { algorithm: "fixed_window"; windowStart: number; windowEnd: number; count: number }
    | {
        algorithm: "sliding_window";
        windowStart: number;
        windowEnd: number;
        current: number;
        previous: number;
        weightedCount: number;
      }
    | { algorithm: "token_bucket"; tokens: number }
    | { algorithm: "gcra"; tat: number; tokens: number }
  );

/** Options of the rate setters of {@link RateLimiter}. */
export interface RateOptions {
  /** `"overall"` (default): all clients share the permits; `"perClient"`: each client id has its own. */
  mode?: "overall" | "perClient";
  /** Delete the configuration after this long unused (at least the interval). Default: kept forever. */
  keepAlive?: Duration;
}

/** The stored configuration of a {@link RateLimiter}. */
export interface RateConfig {
  /** Permits per interval. */
  rate: number;
  /** The interval in ms. */
  interval: number;
  mode: "overall" | "perClient";
  /** The keep-alive in ms, or `null` when none is set. */
  keepAlive: number | null;
}

/** The Redisson-style handle on a named sliding log: see {@link Ratelimit.rateLimiter}. */
export interface RateLimiter {
  /** Sets the rate only if none is set (the first caller wins). Resolves to whether this call set it. */
  trySetRate(rate: number, interval: Duration, options?: RateOptions): Promise<boolean>;
  /** Sets the rate and clears the state: the window starts full. */
  setRate(rate: number, interval: Duration, options?: RateOptions): Promise<void>;
  /**
   * Changes the rate of an existing limiter and keeps the state: permits in use stay in use under the new rate.
   * Resolves to `false`, writing nothing, when no rate is set (Redisson's `updateRate`).
   */
  updateRate(rate: number, interval: Duration, options?: RateOptions): Promise<boolean>;
  /**
   * Takes `permits` (default 1) now if available.
   * @throws {@link EdgelimitError} `EDGELIMIT_NOT_INITIALIZED` when no rate is set.
   */
  tryAcquire(permits?: number): Promise<Decision>;
  /** Takes `permits` (default 1), waiting the exact `retryAfter`, for at most `timeout` ms (default 10 000). */
  acquire(permits?: number, timeout?: number): Promise<Decision>;
  /** Permits available now. */
  availablePermits(): Promise<number>;
  /** Gives back up to `permits`, newest grants first; resolves to how many were given back (0 is a no-op). */
  release(permits?: number): Promise<number>;
  /** The stored configuration, or `null` when no rate is set. */
  getConfig(): Promise<RateConfig | null>;
  /** Deletes the limiter. Resolves to whether it existed. */
  delete(): Promise<boolean>;
  /** Frees the handle's wasm memory now (otherwise freed when it is garbage-collected). */
  free(): void;
}

/**
 * A raw client for the REST endpoint, for commands and scripts outside the limiters (values come back as
 * `@upstash/redis` returns them).
 */
export declare class RestClient {
  /** @param timeoutMs Per-request timeout in ms. Default 1000. */
  constructor(url: string, token: string, timeoutMs?: number);
  /** Runs one command, e.g. `await client.command(["SET", "k", "v"])`. */
  command(command: (string | number)[]): Promise<unknown>;
  /** Runs a Lua script by SHA1 (`EVALSHA`), sending its text (`EVAL`) only when Redis does not have it cached. */
  eval(script: string, keys: (string | number)[], args: (string | number)[]): Promise<unknown>;
  /** Frees the client's wasm memory now (otherwise freed when it is garbage-collected). */
  free(): void;
}
