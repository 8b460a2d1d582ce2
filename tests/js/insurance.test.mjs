// The insurance limit (`onError: { insurance }`) with the npm API against real Redis behind the real bridge: exact
// decisions from Redis; Redis stopped, this process decides under the stated local limit (`reason: "insurance"`,
// never more than it allows); Redis back, Redis decides again at the next call, and nothing decided locally was
// written to it. Then what else meets an outage (several limits, weighted permits, the block cache, reserve), every
// way to misstate the option, the 5 s outage figure docs/npm.md quotes, and the docs' example run as written.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { after, before, test } from "node:test";
import { Ratelimit } from "edgelimit";
import { ROOT, startStack } from "./harness.mjs";

let stack;
let prefixes = 0;
before(async () => (stack = await startStack()));
after(() => stack.stop());

// An hour: nothing frees or refills while a test runs, and sliding logs and buckets have no aligned windows, so
// every count below is exact whatever the machine's speed.
const HOUR = "1 h";

function insured(limiter, insurance, options = {}) {
  const prefix = `ins${++prefixes}`;
  return new Ratelimit({ url: stack.url, token: stack.token, prefix, limiter, cache: false, onError: { insurance }, ...options });
}

/** Runs `during` with Redis stopped behind the bridge, then starts Redis again (empty). */
async function outage(during) {
  await stack.stopRedis();
  try {
    return await during();
  } finally {
    await stack.restartRedis();
  }
}

test("Redis decides exactly; while it is down this process decides under the insurance limit; then Redis again", async () => {
  const ratelimit = insured(Ratelimit.slidingLog(5, HOUR), Ratelimit.slidingLog(3, HOUR));
  const seen = async (id, permits = 1) => {
    const result = await ratelimit.limit(id, { permits });
    return [result.success, result.reason];
  };
  for (let i = 0; i < 5; i++) assert.deepEqual(await seen("ip"), [true, "decided"]);
  assert.deepEqual(await seen("ip"), [false, "decided"]);
  await outage(async () => {
    const results = [];
    for (let i = 0; i < 10; i++) results.push(await ratelimit.limit("ip"));
    for (const result of results) {
      assert.deepEqual([result.reason, result.error.code, result.error.storeUnavailable], ["insurance", "EDGELIMIT_ENDPOINT", true]);
    }
    // The local limit starts afresh (it never saw Redis's count) and admits exactly its 3.
    assert.deepEqual(results.map((r) => r.success), [true, true, true, false, false, false, false, false, false, false]);
    const [first, , , denied] = results;
    assert.deepEqual([first.limit, first.remaining, first.receipt, first.results.length, first.results[0].receipt], [3, 2, undefined, 1, undefined]);
    assert.ok(denied.retryAfter > 3_500_000 && denied.retryAfter <= 3_600_000, `${denied.retryAfter}`);
    // Weighted permits as in Redis; more than the local limit holds (within Redis's) is a denial, not an error.
    assert.deepEqual(await seen("w", 2), [true, "insurance"]);
    assert.deepEqual(await seen("w", 2), [false, "insurance"]);
    assert.deepEqual(await seen("w", 1), [true, "insurance"]);
    assert.deepEqual(await seen("x", 4), [false, "insurance"]);
    // A caller's mistake is an error, insured or not.
    await assert.rejects(ratelimit.limit("ip", { permits: 0 }), { code: "EDGELIMIT_INVALID_ARGUMENT" });
    await assert.rejects(ratelimit.limit("ip", { permits: 6 }), { code: "EDGELIMIT_PERMITS_EXCEED_RATE" });
    await assert.rejects(ratelimit.limit(42), { code: "EDGELIMIT_INVALID_ARGUMENT" });
  });
  for (let i = 0; i < 5; i++) assert.deepEqual(await seen("ip"), [true, "decided"]);
  assert.deepEqual(await seen("ip"), [false, "decided"]);
  assert.equal((await ratelimit.getRemaining("w")).remaining, 5, "nothing decided locally was written to Redis");
});

test("\"same\": the limiter's own limits, several and weighted, all or nothing; limitAll's under its limits", async () => {
  const ratelimit = insured([Ratelimit.slidingLog(4, HOUR), Ratelimit.tokenBucket(1, HOUR, 3)], "same");
  await outage(async () => {
    const granted = await ratelimit.limit("ip", { permits: 2 });
    assert.deepEqual([granted.success, granted.reason, granted.results.map((r) => r.remaining)], [true, "insurance", [2, 1]]);
    const denied = await ratelimit.limit("ip", { permits: 2 });
    assert.deepEqual([denied.success, denied.results.map((r) => r.success)], [false, [true, false]]);
    assert.equal((await ratelimit.limit("ip")).success, true, "the denial took nothing");
    assert.equal((await ratelimit.limit("ip")).success, false);
    const hourly = [{ ...Ratelimit.tokenBucket(1, HOUR, 1), name: "hourly" }];
    assert.deepEqual([(await ratelimit.limitAll("other", hourly)).success, (await ratelimit.limitAll("other", hourly)).success], [true, false]);
    // A concurrency limit is not insured: the store's error.
    const leases = await ratelimit.limitAll("other", [Ratelimit.concurrency(2, HOUR)]).catch((e) => e);
    assert.deepEqual([leases.code, leases.storeUnavailable], ["EDGELIMIT_ENDPOINT", true]);
  });
});

test("the block cache keeps Redis's denials only; reserve meets an outage insured", async () => {
  const cached = insured(Ratelimit.slidingLog(1, HOUR), "same", { cache: true });
  assert.deepEqual([(await cached.limit("c")).reason, (await cached.limit("c")).reason], ["decided", "decided"]);
  const reserving = insured(Ratelimit.gcra(10, "1 s"), Ratelimit.slidingLog(2, HOUR), { reserve: "100 ms" });
  await outage(async () => {
    const denied = await cached.limit("c");
    assert.deepEqual([denied.success, denied.reason], [false, "cache"], "Redis's denial, cached before the outage");
    const local = [await cached.limit("d"), await cached.limit("d"), await cached.limit("d")];
    assert.deepEqual(local.map((r) => [r.success, r.reason]), [[true, "insurance"], [false, "insurance"], [false, "insurance"]]);
    const reserved = [await reserving.limit("r"), await reserving.limit("r"), await reserving.limit("r")];
    assert.deepEqual(reserved.map((r) => [r.success, r.reason]), [[true, "insurance"], [true, "insurance"], [false, "insurance"]]);
  });
  assert.deepEqual(await cached.limit("d").then((r) => [r.success, r.reason]), [true, "decided"], "the local denial was not cached");
});

test("onError's insurance is validated: what is wrong and where, EDGELIMIT_INVALID_CONFIG, before any call", () => {
  const limiter = Ratelimit.slidingLog(5, "1 s");
  const huge = "x".repeat(1_000_000);
  const refused = [
    [{ insurance: [] }, /^the insurance limit: no limits: give at least one/],
    [{ insurance: Ratelimit.slidingLog(NaN, "1 s") }, /^onError\.insurance\.limit must be a whole number.*got the number NaN/],
    [{ insurance: Ratelimit.slidingLog(-1, "1 s") }, /^onError\.insurance\.limit must be .*got the number -1/],
    [{ insurance: Ratelimit.slidingLog(2 ** 32, "1 s") }, /^onError\.insurance\.limit must be .*got the number 4294967296/],
    [{ insurance: Ratelimit.slidingLog(0, "1 s") }, /^onError\.insurance\.limit must be/],
    [{ insurance: Ratelimit.slidingLog(1, "soon") }, /^onError\.insurance\.interval: invalid duration "soon"/],
    [{ insurance: [limiter, { algorithm: "sliding_log", limit: 1 }] }, /^onError\.insurance\[1\]/],
    [{ insurance: { ...limiter, extra: 1 } }, /^onError\.insurance has an unknown field "extra"/],
    [{ insurance: [limiter, limiter] }, /two limits are named/],
    [{ insurance: Ratelimit.concurrency(2, "1 s") }, /cannot be a concurrency limit/],
    [{ insurance: 5 }, /^onError\.insurance must be "same" .*got 5$/],
    [{ insurance: true }, /^onError\.insurance must be "same" .*got true$/],
    [{ insurance: null }, /^onError\.insurance must be "same" .*got null$/],
    [{}, /^onError\.insurance must be "same" .*got undefined$/],
    [{ insurance: "Same" }, /^onError\.insurance must be "same" .*got the string "Same"$/],
    [{ insurance: huge }, /^onError\.insurance must be "same" .*got the string "x{200}"$/],
    [{ insurance: "same", extra: 1 }, /^onError has an unknown field "extra"; the fields are insurance$/],
    [{ Insurance: "same" }, /^onError has an unknown field "Insurance"/],
    [5, /^onError must be "allow", "deny", "throw" or \{ insurance: .*got the number 5$/],
    [null, /^onError must be .*got null$/],
    [[], /^onError must be .* got object$/],
    ["fail-open", /^onError must be "allow", "deny", "throw" or \{ insurance: .*got the string "fail-open"$/],
    [huge, /^onError must be .*got the string "x{200}"$/],
  ];
  for (const [onError, message] of refused) {
    const config = { url: stack.url, token: stack.token, limiter, onError };
    assert.throws(() => new Ratelimit(config), (e) => {
      assert.equal(e.code, "EDGELIMIT_INVALID_CONFIG", e.message);
      assert.match(e.message.replace(/^invalid configuration: /, ""), message);
      assert.ok(e.message.length < 600, `a short message: ${e.message.length} characters`);
      return true;
    }, message.source);
  }
  const elsewhere = [
    [{ url: stack.url, token: stack.token, limiter: Ratelimit.concurrency(2, "1 s"), onError: { insurance: "same" } }, /cannot be a concurrency limit/],
    [{ memory: true, limiter, onError: { insurance: "same" } }, /onError is for a Redis endpoint/],
  ];
  for (const [config, message] of elsewhere) {
    assert.throws(() => new Ratelimit(config), (e) => e.code === "EDGELIMIT_INVALID_CONFIG" && message.test(e.message), message.source);
  }
});

test("a 5 s outage: one process admits no more than its stated local limit (the figure in docs/npm.md)", async () => {
  // Globally 40 per second over about 4 processes: this one states 10 per second (an exact sliding log).
  const ratelimit = insured(Ratelimit.slidingWindow(40, "1 s"), Ratelimit.slidingLog(10, "1 s"));
  const { admitted, asked, took } = await outage(async () => {
    const started = Date.now();
    let [admitted, asked] = [0, 0];
    while (Date.now() - started < 5_000) {
      const result = await ratelimit.limit("203.0.113.7");
      assert.equal(result.reason, "insurance");
      admitted += result.success ? 1 : 0;
      asked++;
    }
    return { admitted, asked, took: Date.now() - started };
  });
  // Any 1 s span holds at most 10 grants; a fresh log grants the first 10 whenever they come.
  const bound = 10 * (Math.floor(took / 1000) + 1);
  console.log(`insurance figure: admitted ${admitted} of ${asked} in a ${took} ms outage; stated 10 per 1 s, at most ${bound}`);
  assert.ok(admitted <= bound, `${admitted} > ${bound}`);
  assert.ok(admitted >= Math.min(10, asked), `${admitted} of ${asked}`);
});

test("docs/npm.md's insurance example runs as it is written, with Redis up and down", async () => {
  const guide = readFileSync(join(ROOT, "docs/npm.md"), "utf8");
  const [, code] = guide.match(/<!-- insurance-example[^>]*-->\n```js\n([\s\S]*?)```/) ?? [];
  assert.ok(code, "docs/npm.md has the insurance example after its <!-- insurance-example --> marker");
  const env = { ...process.env, EDGELIMIT_URL: stack.url, EDGELIMIT_TOKEN: stack.token };
  const run = () => promisify(execFile)("node", ["--input-type=module", "-e", code], { cwd: ROOT, env });
  assert.equal((await run()).stdout, "allowed (decided)\n");
  assert.equal((await outage(run)).stdout, "allowed (insurance)\n");
});
