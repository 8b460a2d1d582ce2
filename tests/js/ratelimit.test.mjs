// The npm package's `Ratelimit`, imported by name as users import it, against real Redis behind the real bridge:
// every method, the block cache, the failure policy (a stalled endpoint, Redis stopped, a wrong token), the
// Redisson-style handle, and the errors for bad input. Waits are asserted from below only (never "within N ms").
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Ratelimit } from "edgelimit";
import { freePort, revokedArray, startStack, startStalledEndpoint, throwingArray, upstashRedis } from "./harness.mjs";

let stack;
let prefixes = 0;
before(async () => (stack = await startStack()));
after(() => stack.stop());

/** A Ratelimit on the stack, under a prefix of its own so tests never share state. */
function ratelimit(limiter, options = {}) {
  return new Ratelimit({ url: stack.url, token: stack.token, prefix: `t${++prefixes}`, limiter, ...options });
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

test("limit: exact counts, weighted permits, and a denial that consumes nothing", async () => {
  const limits = ratelimit(Ratelimit.slidingLog(5, "1 m"), { cache: false });
  const taken = [];
  for (const permits of [2, 2, 2, 1]) taken.push(await limits.limit("ip", { permits }));
  assert.deepEqual(
    taken.map((r) => [r.success, r.remaining, r.limit]),
    [[true, 3, 5], [true, 1, 5], [false, 1, 5], [true, 0, 5]],
  );
  // The denied 2 waited for the first grant to free: a minute after it, to the millisecond the server knows.
  assert.ok(taken[2].retryAfter > 0 && taken[2].retryAfter <= 60_000);
  assert.equal(taken[2].reason, "decided");
  assert.ok(taken[3].reset > Date.now() - 5_000, "reset is a unix time in ms");
});

test("every factory builds its algorithm, with @upstash/ratelimit's argument order", () => {
  assert.deepEqual(Ratelimit.tokenBucket(5, "1 s", 20), { algorithm: "token_bucket", limit: 20, interval: "1 s", rate: 5 });
  assert.deepEqual(Ratelimit.gcra(10, "1 s"), { algorithm: "gcra", limit: 10, interval: "1 s", rate: 10 });
  assert.deepEqual(Ratelimit.fixedWindow(3, "10 s"), { algorithm: "fixed_window", limit: 3, interval: "10 s" });
  assert.deepEqual(Ratelimit.slidingWindow(3, "10 s").algorithm, "sliding_window");
  assert.deepEqual(Ratelimit.slidingLog(3, "10 s").algorithm, "sliding_log");
});

test("token bucket refills continuously: a denial's retryAfter is when one token is back", async () => {
  const bucket = ratelimit(Ratelimit.tokenBucket(10, "1 s", 2), { cache: false });
  assert.equal((await bucket.limit("k")).success, true);
  assert.equal((await bucket.limit("k")).success, true);
  const denied = await bucket.limit("k");
  assert.equal(denied.success, false);
  assert.ok(denied.retryAfter > 0 && denied.retryAfter <= 100, `10 per second: ${denied.retryAfter} ms`);
  await sleep(denied.retryAfter);
  assert.equal((await bucket.limit("k")).success, true, "granted once retryAfter has passed");
});

test("limitAll: several limits in one call, all or nothing, each reported", async () => {
  const limits = ratelimit(Ratelimit.fixedWindow(100, "1 m"));
  const both = [{ ...Ratelimit.slidingLog(3, "1 m"), name: "burst" }, { ...Ratelimit.fixedWindow(4, "1 h"), name: "hourly" }];
  const first = await limits.limitAll("key", both, { permits: 2 });
  assert.deepEqual([first.success, first.results.map((r) => r.remaining)], [true, [1, 2]]);
  // 2 more: the burst limit (1 left) denies, so the hourly one records nothing either.
  const denied = await limits.limitAll("key", both, { permits: 2 });
  assert.deepEqual([denied.success, denied.results.map((r) => [r.success, r.remaining])], [false, [[false, 1], [true, 2]]]);
  assert.equal(denied.remaining, 1, "the denying limit speaks for the result");
  const one = await limits.limitAll("key", both);
  assert.deepEqual([one.success, one.results.map((r) => r.remaining)], [true, [0, 1]]);
  const clash = await limits.limitAll("key", [Ratelimit.fixedWindow(1, "1 s"), Ratelimit.fixedWindow(2, "1 s")]).catch((e) => e);
  assert.equal(clash.code, "EDGELIMIT_INVALID_CONFIG");
  assert.match(clash.message, /two limits are named "fixed_window-1000ms".*distinct name/);
});

test("a limiter array in the config is enforced on every limit() call", async () => {
  const limits = ratelimit([Ratelimit.fixedWindow(2, "1 m"), Ratelimit.gcra(1, "1 h", 5)], { cache: false });
  const results = [];
  for (let i = 0; i < 3; i++) results.push(await limits.limit("u"));
  assert.deepEqual(results.map((r) => [r.success, r.results.length]), [[true, 2], [true, 2], [false, 2]]);
  assert.deepEqual(await limits.getRemaining("u"), { remaining: 0, reset: results[2].reset, limit: 2 });
});

test("getRemaining takes nothing; reset forgets the state and the cached denial", async () => {
  const limits = ratelimit(Ratelimit.fixedWindow(2, "1 m"));
  assert.equal((await limits.getRemaining("u")).remaining, 2);
  assert.equal((await limits.getRemaining("u")).remaining, 2, "peeking is free");
  await limits.limit("u", { permits: 2 });
  assert.equal((await limits.limit("u")).reason, "decided");
  assert.equal((await limits.limit("u")).reason, "cache");
  assert.equal(await limits.reset("u"), true);
  assert.equal(await limits.reset("u"), false, "nothing left to forget");
  const after = await limits.limit("u");
  assert.deepEqual([after.success, after.remaining, after.reason], [true, 1, "decided"]);
});

test("state: what Redis holds for each limit, at one moment of the server's clock", async () => {
  const limits = ratelimit([Ratelimit.slidingLog(10, "1 m"), Ratelimit.fixedWindow(100, "1 h"), Ratelimit.tokenBucket(1, "1 h", 5)], {
    cache: false,
  });
  const fresh = await limits.state("ip");
  assert.deepEqual(fresh.map((s) => [s.algorithm, s.expiresAt, s.stored]), [
    ["sliding_log", null, null],
    ["fixed_window", null, null],
    ["token_bucket", null, null],
  ]);
  for (const permits of [3, 1]) assert.equal((await limits.limit("ip", { permits })).success, true);
  const [log, window, bucket] = await limits.state("ip");
  assert.ok(log.now > Date.now() - 60_000 && log.now === window.now && window.now === bucket.now, "one server moment");
  assert.equal(log.held, 4);
  assert.deepEqual(log.grants.map((g) => g.permits), [3, 1]);
  // Read back with a plain Redis client: the grants' members and scores are exactly what state() reported.
  const redis = upstashRedis(stack);
  const members = await redis.zrange(log.key, 0, -1, { withScores: true });
  // One member per grant, whatever its permits: `<position>:<permits>:<run>:<grant id>` (lua/limits/zset_log.lua).
  assert.deepEqual(members.filter((_, i) => i % 2).map(Number), [log.grants[0].freesAt, log.grants[1].freesAt]);
  assert.deepEqual(members.filter((_, i) => i % 2 === 0).map((m) => String(m).split(":").slice(0, 2).map(Number)), [[0, 3], [3, 1]]);
  assert.ok(log.grants.every((g) => g.freesAt > log.now && g.freesAt <= log.now + 60_000));
  // The key expires with the last grant; PTTL counts from Redis's command clock, which may be a ms off TIME's.
  assert.ok(Math.abs(log.expiresAt - log.grants[1].freesAt) <= 1, `${log.expiresAt} vs ${log.grants[1].freesAt}`);
  assert.equal(String(await redis.get(window.key)), window.stored);
  assert.deepEqual([window.count, window.windowEnd - window.windowStart, window.limit], [4, 3_600_000, 100]);
  assert.ok(window.windowStart <= window.now && window.now < window.windowEnd);
  assert.ok(bucket.tokens >= 1 && bucket.tokens < 1.01, `5 − 4 tokens, refilled 1 per hour: ${bucket.tokens}`);
  await assert.rejects(limits.state(42), { code: "EDGELIMIT_INVALID_ARGUMENT" });
});

test("block cache: a denied identifier is answered from memory, even with Redis stopped, and only until retryAfter", async () => {
  const limits = ratelimit(Ratelimit.slidingLog(1, "400 ms"), { onError: "throw" });
  assert.equal((await limits.limit("c")).success, true);
  const denied = await limits.limit("c");
  assert.deepEqual([denied.success, denied.reason], [false, "decided"]);
  await stack.stopRedis();
  try {
    const cached = await limits.limit("c");
    assert.deepEqual([cached.success, cached.reason, cached.results], [false, "cache", []]);
    assert.ok(cached.retryAfter > 0 && cached.retryAfter <= denied.retryAfter);
    // A larger request is covered too; another identifier is not (and Redis is down, so it throws).
    assert.equal((await limits.limit("c", { permits: 1 })).reason, "cache");
    assert.equal((await limits.limit("d").catch((e) => e)).code, "EDGELIMIT_ENDPOINT");
  } finally {
    await stack.restartRedis();
  }
  await sleep(denied.retryAfter);
  const later = await limits.limit("c");
  assert.deepEqual([later.success, later.reason], [true, "decided"], "the cache let go at retryAfter");
});

test("blockUntilReady waits the exact retryAfter and takes the permits", async () => {
  const limits = ratelimit(Ratelimit.slidingLog(2, "300 ms"));
  await limits.limit("w", { permits: 2 });
  const started = Date.now();
  const ready = await limits.blockUntilReady("w", 5_000);
  assert.deepEqual([ready.success, ready.reason], [true, "decided"]);
  assert.ok(Date.now() - started >= 200, "it waited for the window to move");
  const gaveUp = await limits.blockUntilReady("w", 50, { permits: 2 });
  assert.equal(gaveUp.success, false, "denied when the timeout runs out first");
});

test("onError: a stalled store times out at `timeout` and the policy answers, without hanging or rejecting", async () => {
  const stalled = await startStalledEndpoint();
  try {
    const make = (onError) =>
      new Ratelimit({ url: stalled.url, token: "t", limiter: Ratelimit.fixedWindow(10, "1 s"), timeout: 150, onError });
    const started = Date.now();
    const allowed = await make(undefined).limit("x");
    assert.ok(Date.now() - started >= 145, "it waited the whole timeout");
    assert.deepEqual(
      [allowed.success, allowed.reason, allowed.error.code, allowed.remaining, allowed.retryAfter],
      [true, "timeout", "EDGELIMIT_TIMEOUT", 0, 0],
      "fail open is the default",
    );
    const denied = await make("deny").limit("x");
    assert.deepEqual([denied.success, denied.reason, denied.limit], [false, "timeout", 10]);
    const thrown = await make("throw").limit("x").catch((e) => e);
    assert.deepEqual([thrown.name, thrown.code], ["EdgelimitError", "EDGELIMIT_TIMEOUT"]);
    assert.match(thrown.message, /within 150 ms/);
    // blockUntilReady returns the policy's answer at once instead of retrying a dead store.
    const blocked = await make("deny").blockUntilReady("x", 10_000);
    assert.deepEqual([blocked.success, blocked.reason], [false, "timeout"]);
  } finally {
    stalled.stop();
  }
});

test("onError: Redis down behind the bridge is reason 'error'; nothing listening is EDGELIMIT_TRANSPORT; a wrong token always rejects", async () => {
  const limits = ratelimit(Ratelimit.gcra(5, "1 s"), { onError: "deny" });
  await stack.stopRedis();
  try {
    const down = await limits.limit("y");
    assert.deepEqual([down.success, down.reason, down.error.code], [false, "error", "EDGELIMIT_ENDPOINT"]);
  } finally {
    await stack.restartRedis();
  }
  assert.equal((await limits.limit("y")).success, true, "back once Redis is");
  const nobody = `http://127.0.0.1:${await freePort()}`;
  const refused = await new Ratelimit({ url: nobody, token: "t", limiter: Ratelimit.gcra(5, "1 s"), onError: "throw" })
    .limit("y")
    .catch((e) => e);
  assert.equal(refused.code, "EDGELIMIT_TRANSPORT");
  assert.match(refused.message, new RegExp(`could not reach the REST endpoint at ${nobody}: fetch failed: .*ECONNREFUSED`));
  const wrongToken = new Ratelimit({ url: stack.url, token: "wrong", limiter: Ratelimit.gcra(5, "1 s"), onError: "allow" });
  const error = await wrongToken.limit("y").catch((e) => e);
  assert.deepEqual([error.code, error.name], ["EDGELIMIT_AUTH", "EdgelimitError"], "a wrong token is not absorbed");
  assert.match(error.message, /rejected the token \(HTTP 401\)/);
});

test("bad configuration and arguments: a clear EDGELIMIT_ error naming what was wrong", async () => {
  const base = { url: stack.url, token: stack.token, limiter: Ratelimit.fixedWindow(5, "1 s") };
  const configError = (config) => {
    try {
      new Ratelimit(config);
    } catch (e) {
      return [e.code, e.message];
    }
    return "accepted";
  };
  const cases = [
    [{ ...base, limiter: Ratelimit.fixedWindow(0, "1 s") }, /limiter.limit must be a whole number from 1/],
    [{ ...base, limiter: Ratelimit.fixedWindow(5, 1000) }, /limiter.interval must be a duration with a unit/],
    [{ ...base, limiter: Ratelimit.fixedWindow(5, "1 fortnight") }, /invalid duration "1 fortnight"/],
    [{ ...base, limiter: Ratelimit.tokenBucket(0, "1 s", 5) }, /limiter.rate must be a whole number from 1/],
    [{ ...base, limiter: { algorithm: "leaky_bucket", limit: 1, interval: "1 s" } }, /unknown algorithm "leaky_bucket"/],
    [{ ...base, limiter: [] }, /no limits: give at least one/],
    [{ ...base, limiter: undefined }, /limiter must be a limiter from a factory/],
    [{ ...base, url: undefined }, /url must be a string/],
    [{ ...base, url: "not a url" }, /url/],
    [{ ...base, timeout: 0 }, /timeout/],
    [{ ...base, onError: "ignore" }, /onError must be "allow", "deny", "throw" or \{ insurance: a limiter, an array of them, or "same" \}, got the string "ignore"/],
    [{ ...base, prefix: "a{b}" }, /key prefix "a\{b\}" must be non-empty and free of/],
    [{ ...base, cache: -1 }, /cache must be true, false or a whole number of entries from 0 to 10000000, got the number -1/],
    // A field a limit does not have would be ignored (@upstash/ratelimit names the rate refillRate), and so would a
    // rate where the algorithm has none: the limit would not be the one meant.
    [{ ...base, limiter: { ...Ratelimit.tokenBucket(10, "1 s", 10), refillRate: 1 } }, /limiter has an unknown field "refillRate"/],
    [{ ...base, limiter: { ...Ratelimit.slidingLog(10, "1 s"), rate: 1 } }, /limiter.rate: a sliding-log limit has no rate/],
    // A lone surrogate would read as U+FFFD: "a\uD800" and "a\uDC00" would share one prefix's state.
    [{ ...base, prefix: "a\uD800" }, /prefix holds a lone surrogate/],
    [{ ...base, limiter: { ...Ratelimit.slidingLog(10, "1 s"), name: "n\uDC00" } }, /limiter.name holds a lone surrogate/],
  ];
  for (const [config, message] of cases) {
    const [code, text] = configError(config);
    assert.equal(code, "EDGELIMIT_INVALID_CONFIG", `${text}`);
    assert.match(text, message);
  }
  const limits = new Ratelimit(base);
  const argument = async (call) => {
    const e = await call().catch((e) => e);
    return [e.code, e.message];
  };
  assert.deepEqual(await argument(() => limits.limit("k", { permits: 6 })), [
    "EDGELIMIT_PERMITS_EXCEED_RATE",
    "asked for 6 permits, but the limit is 5: such a request could never succeed; ask for at most 5, or raise the limit",
  ]);
  assert.match((await argument(() => limits.limit("k", { permits: 1.5 })))[1], /permits must be a whole number from 1 to 4294967295, got the number 1.5/);
  assert.match((await argument(() => limits.limit("k", 2)))[1], /options must be an object like \{ permits: 2 \}, got the number 2/);
  assert.match((await argument(() => limits.limit(42)))[1], /identifier must be a string, got the number 42/);
  assert.equal((await argument(() => limits.blockUntilReady("k", "1 s")))[0], "EDGELIMIT_INVALID_ARGUMENT");
  assert.equal((await limits.getRemaining("k")).remaining, 5, "nothing was taken by any of them");
});

test("rateLimiter(name): the Redisson-style handle, every method", async () => {
  const limits = ratelimit(Ratelimit.fixedWindow(1, "1 s"));
  const handle = limits.rateLimiter("redisson-js");
  assert.equal((await handle.tryAcquire().catch((e) => e)).code, "EDGELIMIT_NOT_INITIALIZED");
  assert.equal(await handle.getConfig(), null);
  assert.equal(await handle.trySetRate(3, "1 m", { keepAlive: "1 h" }), true);
  assert.equal(await handle.trySetRate(9, "1 m"), false, "the first caller wins");
  assert.deepEqual(await handle.getConfig(), { rate: 3, interval: 60_000, mode: "overall", keepAlive: 3_600_000 });
  assert.deepEqual(pick(await handle.tryAcquire(2)), [true, 1]);
  assert.deepEqual(pick(await handle.tryAcquire(2)), [false, 1]);
  assert.equal(await handle.availablePermits(), 1);
  assert.equal(await handle.release(5), 2, "gives back what is in use, no more");
  assert.equal(await handle.availablePermits(), 3);
  assert.equal(await handle.release(0), 0, "releasing 0 is a no-op, as Redisson's");
  assert.equal(await handle.updateRate(1, "1 m"), true);
  assert.deepEqual(pick(await handle.acquire(1, 100)), [true, 0]);
  const timedOut = await handle.acquire(1, 100);
  assert.equal(timedOut.success, false, "acquire gives up at its timeout");
  await handle.setRate(2, "1 m", { mode: "perClient" });
  assert.equal((await handle.getConfig()).mode, "perClient");
  const other = limits.rateLimiter("redisson-js", { clientId: "other" });
  assert.deepEqual(pick(await handle.tryAcquire(2)), [true, 0]);
  assert.deepEqual(pick(await other.tryAcquire(2)), [true, 0], "per client: each id has its own budget");
  assert.equal(await handle.delete(), true);
  assert.equal(await handle.getConfig(), null);
  const bad = await handle.setRate(2, "1 m", { mode: "everyone" }).catch((e) => e);
  assert.match(bad.message, /mode must be "overall" or "perClient", got the string "everyone"/);
});

function pick(decision) {
  return [decision.success, decision.remaining];
}

test("concurrency: a grant is a lease; refunding it frees the slot, and a denial is not cached", async () => {
  const slots = ratelimit(Ratelimit.concurrency(2, "1 m"));
  const [first, second] = [await slots.limit("upload"), await slots.limit("upload")];
  assert.deepEqual([first.success, second.success, first.remaining, second.remaining], [true, true, 1, 0]);
  const full = await slots.limit("upload");
  assert.deepEqual([full.success, full.reason], [false, "decided"]);
  assert.ok(full.retryAfter > 0 && full.retryAfter <= 60_000, "an upper bound: the first lease's timeout");
  const released = await slots.refund("upload", first.receipt);
  assert.deepEqual([released.success, released.results[0].remaining], [true, 1]);
  // Not answered from the block cache: the slot given back is taken at once.
  const again = await slots.limit("upload");
  assert.deepEqual([again.success, again.reason], [true, "decided"]);
  assert.equal((await slots.refund("upload", first.receipt)).success, false, "a lease is given back once");
});

test("release ends a grant's leases and leaves its other limits counting the request, which ran", async () => {
  // Review: refunding every receipt to end the lease gave the per-minute permits back too: 10 of 10 in a minute on 3.
  const limits = ratelimit([Ratelimit.concurrency(2, "30 s"), Ratelimit.slidingLog(3, "1 m")], { cache: false });
  const granted = [];
  for (let i = 0; i < 10; i++) {
    const result = await limits.limit("worker");
    granted.push(result.success);
    if (result.success) {
      const released = await limits.release("worker", result.results.map((r) => r.receipt));
      assert.deepEqual([released.success, released.results.length, released.results[0].limit], [true, 1, 2]);
    }
  }
  assert.deepEqual(granted, [true, true, true, false, false, false, false, false, false, false]);
  const [leases, log] = await limits.state("worker");
  assert.deepEqual([leases.grants.length, log.grants.length], [0, 3], "no lease held; the three requests counted");
  // Under one concurrency limit, a lease's receipt alone; with no concurrency limit, nothing to release.
  const slots = ratelimit(Ratelimit.concurrency(1, "30 s"));
  const lease = await slots.limit("job");
  assert.equal((await slots.release("job", lease.receipt)).success, true);
  assert.equal((await slots.limit("job")).success, true);
  const rate = ratelimit(Ratelimit.slidingLog(3, "1 m"));
  const grant = await rate.limit("job");
  await assert.rejects(rate.release("job", grant.receipt), { code: "EDGELIMIT_INVALID_ARGUMENT", message: /no lease to release/ });
});

test("layout: per-identifier keys are tagged by identifier, decide alike, and a bad layout is a config error", async () => {
  const redis = upstashRedis(stack);
  const spread = ratelimit([Ratelimit.slidingLog(2, "1 m"), Ratelimit.fixedWindow(10, "1 h")], { layout: "per-identifier", cache: false });
  const taken = [];
  for (let i = 0; i < 3; i++) taken.push((await spread.limit("u{1}")).success);
  assert.deepEqual(taken, [true, true, false]);
  const keys = await redis.keys(`t${prefixes}:*`);
  // Two limits, one identifier: both keys under one hash tag (the braced identifier hashed).
  assert.equal(keys.length, 2, String(keys));
  const tags = new Set(keys.map((key) => key.match(/^t\d+:v2\{([^}]+)\}:/)?.[1]));
  assert.equal(tags.size, 1, String(keys));
  assert.match([...tags][0], /^#[0-9a-f]{64}$/);
  for (const layout of ["cluster", "", 2, "per-identifier\0"]) {
    assert.throws(() => ratelimit(Ratelimit.gcra(1, "1 s"), { layout }), (e) => e.code === "EDGELIMIT_INVALID_CONFIG" || e.code === "EDGELIMIT_INVALID_ARGUMENT", String(layout));
  }
});

/** A TCP relay to the stack's bridge that counts the HTTP requests to `path` it carries. */
async function countingRelay() {
  const { createServer, connect } = await import("node:net");
  const upstream = new URL(stack.url);
  let sent = "";
  const server = createServer((client) => {
    const bridge = connect(Number(upstream.port), upstream.hostname);
    client.on("data", (chunk) => {
      sent += chunk.toString("latin1");
      bridge.write(chunk);
    });
    bridge.pipe(client);
    client.on("error", () => bridge.destroy());
    bridge.on("error", () => client.destroy());
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    requests: (path) => sent.split(`POST ${path} HTTP/1.1\r\n`).length - 1,
    close: () => server.close(),
  };
}

test("decisions made at once are one script call in one HTTP request (coalescing), each exact; coalesce: false sends one each", async () => {
  const relay = await countingRelay();
  try {
    for (const coalesce of [true, false]) {
      const limits = new Ratelimit({
        url: relay.url, token: stack.token, prefix: `t${++prefixes}`, limiter: Ratelimit.slidingLog(10, "1 m"),
        cache: false, coalesce,
      });
      // Alone, a decision is a request of its own (and loads the script the first time); two at once load the
      // script that decides several in one call.
      assert.equal((await limits.limit("warm-up")).success, true);
      await Promise.all([limits.limit("warm-up"), limits.limit("warm-up")]);
      const [single, pipelined] = [relay.requests("/"), relay.requests("/pipeline")];
      const results = await Promise.all(Array.from({ length: 25 }, () => limits.limit("id")));
      assert.equal(results.filter((r) => r.success).length, 10, `coalesce: ${coalesce}`);
      // One script call decides them in the calls' order; separate requests reach the bridge in any order.
      if (coalesce) assert.deepEqual(results.map((r) => r.success), [...Array(10).fill(true), ...Array(15).fill(false)]);
      const requests = [relay.requests("/") - single, relay.requests("/pipeline") - pipelined];
      assert.deepEqual(requests, coalesce ? [1, 0] : [25, 0], `coalesce: ${coalesce}`);
    }
  } finally {
    relay.close();
  }
});

test("timeout: at most 2^31 - 1 ms, the longest a JS timer waits (a longer one fires at once: every call would time out)", () => {
  assert.throws(() => ratelimit(Ratelimit.fixedWindow(1, "1 s"), { timeout: 2 ** 31 }), {
    code: "EDGELIMIT_INVALID_CONFIG",
    message: /the request timeout must be at most 2147483647 ms .* got 2147483648 ms/,
  });
  ratelimit(Ratelimit.fixedWindow(1, "1 s"), { timeout: 2 ** 31 - 1 });
});

test("a URL fetch cannot send to, or a token a header cannot carry, is refused at once, not failed (and absorbed) per request", () => {
  const limiter = Ratelimit.fixedWindow(1, "1 s");
  for (const url of ["http://a b", "https://[bad"]) {
    assert.throws(() => new Ratelimit({ url, token: "t", limiter, onError: "allow" }), {
      code: "EDGELIMIT_INVALID_CONFIG",
      message: /is not a URL a request can go to/,
    });
  }
  for (const token of ["t\u2603", "a b", "t\r\nx: y"]) {
    assert.throws(() => new Ratelimit({ url: "http://127.0.0.1:1", token, limiter, onError: "allow" }), {
      code: "EDGELIMIT_INVALID_CONFIG",
      message: /which an HTTP header cannot carry/,
    });
  }
});

test("coalesce must be a boolean", () => {
  assert.throws(
    () => ratelimit(Ratelimit.fixedWindow(1, "1 s"), { coalesce: "yes" }),
    { code: "EDGELIMIT_INVALID_CONFIG", message: /coalesce must be true or false, got the string "yes"/ },
  );
});

test("a misspelt option is refused, never left out: it would change what the limiter does unseen", async () => {
  // `onerror: "deny"` left out would fail open; `permit: 5` would take 1 permit; a missing refill rate would be
  // maxTokens per interval; a `keepalive` left out would keep the limiter forever.
  assert.throws(() => ratelimit(Ratelimit.fixedWindow(1, "1 s"), { onerror: "deny" }), {
    code: "EDGELIMIT_INVALID_CONFIG",
    message: /new Ratelimit\(options\) has an unknown field "onerror"; the fields are .*onError/,
  });
  assert.throws(() => ratelimit(Ratelimit.tokenBucket(undefined, "1 s", 100)), {
    code: "EDGELIMIT_INVALID_CONFIG",
    message: /limiter\.rate .* got null/,
  });
  const limits = ratelimit(Ratelimit.fixedWindow(10, "1 m"));
  for (const options of [{ permit: 5 }, { Permits: 5 }]) {
    await assert.rejects(limits.limit("u", options), { message: /options has an unknown field/ });
  }
  // A getter that throws is the caller's error, not an option left out (which took 1 permit).
  const throwing = { get permits() { throw new Error("boom"); } };
  await assert.rejects(limits.limit("u", throwing), {
    code: "EDGELIMIT_INVALID_ARGUMENT",
    message: /reading "permits" of the object given threw: Error: boom/,
  });
  // So is an array whose traps throw, or a revoked Proxy: once an exception escaping the module in a microtask,
  // which ended the Node process.
  for (const limiters of [throwingArray([Ratelimit.fixedWindow(1, "1 m")], "length"), throwingArray([Ratelimit.fixedWindow(1, "1 m")], "0"), revokedArray()]) {
    await assert.rejects(limits.limitAll("u", limiters), { code: "EDGELIMIT_INVALID_ARGUMENT", message: /threw: .*(boom|revoked)/ });
    await assert.rejects(limits.refund("u", limiters), { code: "EDGELIMIT_INVALID_ARGUMENT", message: /threw: .*(boom|revoked)/ });
  }
  assert.equal((await limits.limit("u", { permits: 5 })).remaining, 5, "nothing was taken by the refused calls");
  // A misspelt clientId left out would put every client's per-client state under one.
  assert.throws(() => limits.rateLimiter("r", { clientID: "a" }), { code: "EDGELIMIT_INVALID_CONFIG", message: /unknown field "clientID"/ });
  assert.throws(() => limits.rateLimiter("r", { get clientId() { throw new Error("boom"); } }), { code: "EDGELIMIT_INVALID_ARGUMENT" });
  const handle = limits.rateLimiter(`misspelt-${prefixes}`);
  await assert.rejects(handle.trySetRate(5, "1 s", { keepalive: "1 h" }), { message: /unknown field "keepalive"/ });
  assert.equal(await handle.trySetRate(5, "1 s", { keepAlive: "1 h" }), true, "nothing was set by the refused call");
});

/** `clients` each asking for "hot" every 3 ms or so for 600 ms; every result, and when they started. */
async function hammer(clients) {
  const results = [];
  const started = Date.now();
  await Promise.all(
    clients.map(async (client) => {
      while (Date.now() - started < 600) {
        results.push(await client.limit("hot"));
        await sleep(3);
      }
    }),
  );
  return { results, started };
}

test("reserve: a hot identifier is answered from reserved permits, exactly within the limit", async () => {
  // 20 at once, then 10 per second. Two clients (two Ratelimits: two processes) hammer one identifier for 600 ms.
  const prefix = `t${++prefixes}`;
  const clients = [0, 1].map(() => ratelimit(Ratelimit.gcra(10, "1 s", 20), { reserve: "200 ms", prefix }));
  const { results, started } = await hammer(clients);
  const granted = results.filter((r) => r.success).length;
  // At most the burst plus what refilled in the run (and the run's own ms, rounded up).
  assert.ok(granted <= 20 + Math.ceil(((Date.now() - started + 1) * 10) / 1000), `${granted} granted`);
  assert.ok(results.some((r) => r.reason === "reserved" && r.success), "some grants came from a block");
});

test("reserve: a sliding log's reserved permits keep every window within the limit", async () => {
  // 15 in any second; two clients hammer one identifier for 600 ms: within one interval, so at most 15 in all.
  const prefix = `t${++prefixes}`;
  const clients = [0, 1].map(() => ratelimit(Ratelimit.slidingLog(15, "1 s"), { reserve: "200 ms", prefix }));
  const { results } = await hammer(clients);
  const granted = results.filter((r) => r.success).length;
  assert.ok(granted <= 15, `${granted} granted`);
  assert.ok(results.some((r) => r.reason === "reserved" && r.success), "some grants came from a block");
});

test("reserve: under several limits a hot identifier is answered from reserved permits of every limit, within each", async () => {
  // 15 in any second and 100 per second of GCRA; two clients hammer one identifier for 600 ms: within one interval of
  // the sliding log, so at most 15 in all, every grant taken from both limits.
  const prefix = `t${++prefixes}`;
  const limits = [Ratelimit.slidingLog(15, "1 s"), Ratelimit.gcra(100, "1 s")];
  const clients = [0, 1].map(() => ratelimit(limits, { reserve: "200 ms", prefix }));
  const { results } = await hammer(clients);
  const granted = results.filter((r) => r.success).length;
  assert.ok(granted <= 15, `${granted} granted`);
  assert.ok(results.some((r) => r.reason === "reserved" && r.success), "some grants came from reserved permits");
  // A decision Redis took part in carries each limit's; one made here none. No grant of several limits has one
  // receipt (each limit's is in its result), and a limit whose reserved permit was taken has none (not refunded).
  assert.ok(results.every((r) => [0, 2].includes(r.results.length) && !r.receipt));
  assert.ok(results.some((r) => r.reason === "decided" && r.success && r.results.length === 2));
});

test("reserve: concurrency leases lent from reserved permits are refunded to them, with no round trip", async () => {
  // 3 leases of 10 s. The first two are Redis's (their usual receipts); with two held at once the second reserves 1,
  // and the third is lent from it, with a local receipt. The limit is then full; the local lease refunded is lent
  // again locally.
  const client = ratelimit(Ratelimit.concurrency(3, "10 s"), { reserve: "500 ms" });
  const first = await client.limit("job");
  assert.deepEqual([first.success, first.reason], [true, "decided"]);
  assert.deepEqual([(await client.limit("job")).reason], ["decided"]);
  const lent = await client.limit("job");
  assert.deepEqual([lent.success, lent.reason], [true, "reserved"]);
  assert.match(lent.receipt, /^1:local-[0-9a-f]{16}$/);
  assert.equal((await client.limit("job")).success, false);
  assert.equal((await client.refund("job", lent.receipt)).success, true);
  assert.equal((await client.refund("job", lent.receipt)).success, false);
  const again = await client.limit("job");
  assert.deepEqual([again.success, again.reason], [true, "reserved"]);
  // Redis's lease refunded in Redis: its permit is free again there.
  assert.equal((await client.refund("job", first.receipt)).success, true);
  const last = await client.limit("job");
  assert.deepEqual([last.success, last.reason], [true, "decided"]);
});

test("reserve: requests at once wait for one reservation, but not in Workers", async () => {
  // 20 requests of one client at once on a fresh identifier: the first asks Redis (no demand seen yet, so it
  // reserves nothing), the others wait for its reply; one of them then reserves for the rest: two round trips.
  // In Workers (known by their global WebSocketPair) a request never waits for another's call, which workerd would
  // cancel when that request ends: each asks Redis itself.
  for (const workers of [false, true]) {
    if (workers) globalThis.WebSocketPair = class {};
    try {
      const client = ratelimit(Ratelimit.gcra(100, "1 s", 100), { reserve: "500 ms", prefix: `t${++prefixes}` });
      const results = await Promise.all(Array.from({ length: 20 }, () => client.limit("at-once")));
      assert.ok(results.every((r) => r.success), `workers: ${workers}: ${JSON.stringify(results.map((r) => [r.success, r.reason]))}`);
      assert.equal(results.filter((r) => r.reason !== "reserved").length, workers ? 20 : 2, `workers: ${workers}`);
    } finally {
      delete globalThis.WebSocketPair;
    }
  }
});

test("reserve needs GCRA, fixed-window, sliding-log limits or one concurrency limit, and a duration with its unit", () => {
  assert.throws(() => ratelimit(Ratelimit.tokenBucket(10, "1 s", 10), { reserve: "100 ms" }), {
    code: "EDGELIMIT_INVALID_CONFIG",
    message: /reserving permits needs a GCRA, fixed-window, sliding-log or concurrency quota/,
  });
  assert.throws(() => ratelimit([Ratelimit.gcra(10, "1 s"), Ratelimit.concurrency(5, "1 s")], { reserve: "100 ms" }), {
    code: "EDGELIMIT_INVALID_CONFIG",
    message: /a concurrency limit reserves permits only alone/,
  });
  assert.throws(() => ratelimit(Ratelimit.gcra(10, "1 s"), { reserve: 100 }), {
    code: "EDGELIMIT_INVALID_CONFIG",
    message: /reserve must be a duration with a unit/,
  });
  assert.throws(() => ratelimit(Ratelimit.gcra(10, "1 s"), { reserve: "900 ms" }), {
    code: "EDGELIMIT_INVALID_CONFIG",
    message: /use at most 500 ms/,
  });
});
