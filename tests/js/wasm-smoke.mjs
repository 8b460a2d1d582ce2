// The checks both wasm smoke tests run, inside whatever runtime loaded the package: Node or workerd.
// Returns a plain object so a Worker can send it back as JSON.
export async function smoke({ RestClient }, url, token) {
  const client = new RestClient(url, token, 5000);
  const wrongToken = await new RestClient(url, "wrong", 5000).command(["PING"]).catch((e) => e);
  const badArgument = await client.command([{}]).catch((e) => e);
  return {
    ping: await client.command(["PING"]),
    set: await client.command(["SET", "wasm:k", "wasm-value"]),
    get: await client.command(["GET", "wasm:k"]),
    incr: await client.command(["INCRBY", "wasm:n", 5]),
    nil: await client.command(["GET", "wasm:missing"]),
    script: await client.eval("return {KEYS[1], tonumber(ARGV[1]) * 2}", ["{w}:key"], [21]),
    wrongToken: { name: wrongToken.name, code: wrongToken.code },
    badArgument: { code: badArgument.code, message: badArgument.message },
  };
}

export const EXPECTED = {
  ping: "PONG",
  set: "OK",
  get: "wasm-value",
  incr: 5,
  nil: null,
  script: ["{w}:key", 42],
  wrongToken: { name: "EdgelimitError", code: "EDGELIMIT_AUTH" },
  badArgument: {
    code: "EDGELIMIT_INVALID_ARGUMENT",
    message: "invalid argument: command[0] must be a string or an integer, got object",
  },
};

// The `Ratelimit` checks both runtimes run: every algorithm once, the block cache, several limits in one round
// trip, the Redisson-style handle and the error codes. Values are exact: limits of a minute leave no timing slack
// to worry about. `prefix` keeps runs apart.
export async function ratelimitSmoke({ Ratelimit }, url, token, prefix) {
  const make = (limiter) => new Ratelimit({ url, token, prefix, limiter });
  const first = (results) => results.map((r) => [r.success, r.remaining, r.reason]);
  const out = {};
  for (const [name, limiter] of Object.entries({
    slidingLog: Ratelimit.slidingLog(3, "1 m"),
    fixedWindow: Ratelimit.fixedWindow(3, "1 m"),
    slidingWindow: Ratelimit.slidingWindow(3, "1 m"),
    tokenBucket: Ratelimit.tokenBucket(1, "1 m", 3),
    gcra: Ratelimit.gcra(1, "1 m", 3),
  })) {
    const ratelimit = make(limiter);
    const results = [];
    for (let i = 0; i < 5; i++) results.push(await ratelimit.limit("user"));
    out[name] = first(results);
    // Within a minute, except for the sliding window: its previous window still weighs on the next one, so its
    // wait can reach into the following minute (up to two intervals, depending on where in the minute this runs).
    const longest = name === "slidingWindow" ? 120_000 : 60_000;
    out[`${name}RetryBounded`] = results[3].retryAfter > 0 && results[3].retryAfter <= longest;
  }
  // Limits are keyed by algorithm and interval unless named: the 1-minute fixed windows below share one count.
  const ratelimit = make(Ratelimit.fixedWindow(5, "1 m"));
  const all = await ratelimit.limitAll("other", [Ratelimit.slidingLog(2, "1 m"), Ratelimit.fixedWindow(9, "1 m")], {
    permits: 2,
  });
  out.limitAll = [all.success, all.remaining, all.results.map((r) => r.remaining)];
  out.remaining = (await ratelimit.getRemaining("other")).remaining;
  const handle = ratelimit.rateLimiter(`${prefix}-redisson`);
  out.handle = [await handle.trySetRate(2, "1 m"), (await handle.tryAcquire()).remaining, await handle.availablePermits()];
  const tooMany = await ratelimit.limit("user", { permits: 6 }).catch((e) => e);
  out.tooMany = [tooMany.name, tooMany.code];
  return out;
}

const TWO_THEN_CACHE = [
  [true, 2, "decided"],
  [true, 1, "decided"],
  [true, 0, "decided"],
  [false, 0, "decided"],
  [false, 0, "cache"],
];

export const EXPECTED_RATELIMIT = {
  slidingLog: TWO_THEN_CACHE,
  slidingLogRetryBounded: true,
  fixedWindow: TWO_THEN_CACHE,
  fixedWindowRetryBounded: true,
  slidingWindow: TWO_THEN_CACHE,
  slidingWindowRetryBounded: true,
  tokenBucket: TWO_THEN_CACHE,
  tokenBucketRetryBounded: true,
  gcra: TWO_THEN_CACHE,
  gcraRetryBounded: true,
  limitAll: [true, 0, [0, 7]],
  remaining: 3,
  handle: [true, 1, 1],
  tooMany: ["EdgelimitError", "EDGELIMIT_PERMITS_EXCEED_RATE"],
};
