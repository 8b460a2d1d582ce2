// The memory backend (`new Ratelimit({ memory: true, … })`): one scenario table run through memory and through real
// Redis behind the real bridge, every decision compared (success, remaining, limit exactly; reset and retryAfter
// relative to each side's clock); then what only memory has: an injected clock that moves time, a clock that breaks
// (never an admission), option combinations refused, and the docs' example run as it is written.
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

// Long intervals: a run of the table stays within one aligned window (a day), so both sides see the same windows,
// and refills are too slow to change a count in the second the run takes.
const LIMITERS = {
  slidingLog: Ratelimit.slidingLog(5, "1 d"),
  fixedWindow: Ratelimit.fixedWindow(5, "1 d"),
  slidingWindow: Ratelimit.slidingWindow(5, "1 d"),
  tokenBucket: Ratelimit.tokenBucket(2, "1 d", 5),
  gcra: Ratelimit.gcra(2, "1 d", 5),
  concurrency: Ratelimit.concurrency(5, "1 d"),
  several: [
    { ...Ratelimit.slidingLog(5, "1 d"), name: "burst" },
    { ...Ratelimit.tokenBucket(1, "1 d", 6), name: "bucket" },
    { ...Ratelimit.fixedWindow(7, "1 d"), name: "daily" },
  ],
};

/** The table: weighted permits, denials that consume nothing, refunds and releases by receipt, peeks, a reset. */
const SCENARIO = [
  ["limit", 2], ["limit", 1], ["remaining"], ["limit", 3], ["limit", 2], ["refund", 0], ["limit", 2], ["limit", 1],
  ["release", 1], ["limit", 1], ["remaining"], ["limit", 4], ["reset"], ["limit", 5], ["limit", 1], ["remaining"],
];

/**
 * Runs SCENARIO on `ratelimit`, calling `step(i)` before step i; every result with the middle of its call and half its
 * length (Redis reads its clock during the call, on this machine's clock).
 */
async function run(ratelimit, step = () => {}) {
  const seen = [];
  const receipts = [];
  for (const [i, [op, n]] of SCENARIO.entries()) {
    step(i);
    const before = Date.now();
    let result;
    if (op === "limit") {
      result = await ratelimit.limit("id", { permits: n });
      if (result.success) receipts.push(result.results.map((r) => r.receipt));
    } else if (op === "remaining") {
      result = await ratelimit.getRemaining("id");
    } else if (op === "reset") {
      result = { reset: await ratelimit.reset("id") };
    } else {
      // A refund or release of the n-th grant kept; a release without a concurrency limit is an error to compare.
      result = await ratelimit[op]("id", receipts[n]).catch((e) => ({ code: e.code }));
    }
    const end = Date.now();
    seen.push({ result, at: (before + end) / 2, off: (end - before) / 2 });
  }
  return seen;
}

/** The exactly comparable part of a result (a receipt's permits, not its mark), and its times. */
function split({ reason, error, receipt, results, reset, retryAfter, ...exact }) {
  const each = (results ?? []).map(({ reset, retryAfter, receipt, ...r }) => ({ ...r, receipt: receipt?.split(":")[0] }));
  const times = [reset, retryAfter, ...(results ?? []).flatMap((r) => [r.reset, r.retryAfter])];
  return { exact: { ...exact, reason, results: each, receipt: receipt?.split(":")[0] }, times };
}

test("the memory backend decides every algorithm, weighted and several limits, as Redis does", async () => {
  for (const [name, limiter] of Object.entries(LIMITERS)) {
    const redis = new Ratelimit({ url: stack.url, token: stack.token, prefix: `m${++prefixes}`, limiter, cache: false });
    const remote = await run(redis);
    // Memory replays Redis's timeline: each step at the middle of Redis's call.
    let now = 0;
    const memory = new Ratelimit({ memory: true, limiter, clock: () => now });
    const local = await run(memory, (i) => (now = Math.round(remote[i].at)));
    let off = 0;
    for (const [i, r] of remote.entries()) {
      const [a, b] = [split(local[i].result), split(r.result)];
      const step = `${name} step ${i} (${SCENARIO[i].join(" ")})`;
      assert.deepEqual(a.exact, b.exact, step);
      off = Math.max(off, r.off);
      a.times.forEach((x, j) => {
        const y = b.times[j];
        if (typeof x !== "number") assert.equal(x, y, step);
        else assert.ok(Math.abs(x - y) <= 2 * off + 2, `${step} time ${j}: memory ${x}, Redis ${y} (±${2 * off + 2})`);
      });
    }
  }
});

test("an injected clock moves time: windows end, buckets refill, leases free, exactly when the model says", async () => {
  let now = 1_700_000_000_000;
  const ratelimit = new Ratelimit({ memory: true, limiter: Ratelimit.fixedWindow(2, "1 s"), clock: () => now });
  const first = await ratelimit.limit("ip", { permits: 2 });
  const denied = await ratelimit.limit("ip");
  assert.deepEqual([first.success, first.remaining, first.reset], [true, 0, 1_700_000_001_000]);
  assert.deepEqual([denied.success, denied.retryAfter, denied.reason], [false, 1_000, "decided"]);
  now += 999;
  assert.equal((await ratelimit.limit("ip")).success, false);
  now += 1;
  assert.equal((await ratelimit.limit("ip")).success, true, "the next window");

  const bucket = new Ratelimit({ memory: true, limiter: Ratelimit.tokenBucket(10, "1 s", 2), clock: () => now });
  await bucket.limit("k", { permits: 2 });
  const empty = await bucket.limit("k");
  assert.deepEqual([empty.success, empty.retryAfter], [false, 100]);
  now += 100;
  assert.equal((await bucket.limit("k")).success, true, "one token back after 100 ms");

  const leases = new Ratelimit({ memory: true, limiter: Ratelimit.concurrency(1, "10 s"), clock: () => now });
  const lease = await leases.limit("job");
  assert.equal((await leases.limit("job")).success, false);
  assert.deepEqual((await leases.release("job", lease.receipt)).success, true);
  assert.equal((await leases.limit("job")).success, true, "released");
  now += 10_000;
  assert.equal((await leases.limit("job")).success, true, "a lease not released frees itself");
});

test("a clock that gives no time rejects the call, never admits", async () => {
  const clocks = [() => -1, () => 1.5, () => NaN, () => Infinity, () => "1700000000000", () => undefined, () => 2 ** 53,
    () => { throw new Error("clock broke"); }];
  for (const clock of clocks) {
    const ratelimit = new Ratelimit({ memory: true, limiter: Ratelimit.slidingLog(10, "1 s"), clock });
    for (const call of [() => ratelimit.limit("ip"), () => ratelimit.getRemaining("ip"), () => ratelimit.reset("ip")]) {
      await assert.rejects(call(), (e) => e.code === "EDGELIMIT_INVALID_CONFIG" && /clock/.test(e.message), String(clock));
    }
  }
});

test("options that mean nothing in memory are refused with what to do; mistakes are errors as on Redis", async () => {
  const limiter = Ratelimit.fixedWindow(2, "1 s");
  const refused = [
    [{ memory: true, limiter, url: "http://127.0.0.1:1", token: "t" }, /url is for a Redis endpoint.*leave url out, or give url and token instead of memory/],
    [{ memory: true, limiter, onError: "deny" }, /onError is for a Redis endpoint/],
    [{ memory: true, limiter, reserve: "100 ms" }, /reserve is for a Redis endpoint/],
    [{ memory: true, limiter, cache: false }, /cache is for a Redis endpoint/],
    [{ url: stack.url, token: stack.token, limiter, clock: () => 0 }, /clock is for memory: true/],
    [{ memory: true, limiter, clock: 5 }, /clock must be a function/],
    [{ memory: true, limiter, clock: null }, /clock must be a function/],
    [{ memory: "yes", limiter }, /memory must be true or false/],
    [{ limiter }, /url must be a string.*or memory: true/],
    [{ memory: true, limiter: [limiter, limiter] }, /two limits are named/],
  ];
  for (const [config, message] of refused) {
    assert.throws(() => new Ratelimit(config), (e) => e.code === "EDGELIMIT_INVALID_CONFIG" && message.test(e.message), message.source);
  }
  const ratelimit = new Ratelimit({ memory: true, limiter });
  await assert.rejects(ratelimit.limit("ip", { permits: 3 }), { code: "EDGELIMIT_PERMITS_EXCEED_RATE" });
  await assert.rejects(ratelimit.limit("ip", { permits: 0 }), { code: "EDGELIMIT_INVALID_ARGUMENT" });
  await assert.rejects(ratelimit.limit(42), { code: "EDGELIMIT_INVALID_ARGUMENT" });
  await assert.rejects(ratelimit.refund("ip", "1:99999999999999"), { code: "EDGELIMIT_INVALID_ARGUMENT" });
  await assert.rejects(ratelimit.release("ip", "1:0"), { code: "EDGELIMIT_INVALID_ARGUMENT" });
  await assert.rejects(ratelimit.state("ip"), { code: "EDGELIMIT_INVALID_ARGUMENT", message: /getRemaining/ });
  assert.throws(() => ratelimit.rateLimiter("r"), { code: "EDGELIMIT_INVALID_ARGUMENT" });
  // Two limits sharing a name with different algorithms: as on Redis, a fresh state takes either, a held one refuses.
  const gcra = [{ ...Ratelimit.gcra(2, "1 s"), name: "fixed_window-1000ms" }];
  assert.equal((await ratelimit.limitAll("ip", gcra)).success, true, "ip's state is fresh after the refusals");
  await assert.rejects(ratelimit.limit("ip"), { code: "EDGELIMIT_FOREIGN_STATE" });
});

test("docs/npm.md's memory example runs as it is written", async () => {
  const guide = readFileSync(join(ROOT, "docs/npm.md"), "utf8");
  const [, code] = guide.match(/<!-- memory-example[^>]*-->\n```js\n([\s\S]*?)```/) ?? [];
  assert.ok(code, "docs/npm.md has the memory example after its <!-- memory-example --> marker");
  const { stdout } = await promisify(execFile)("node", ["--input-type=module", "-e", code], { cwd: ROOT });
  assert.equal(stdout, "allowed, denied, allowed\n");
});
