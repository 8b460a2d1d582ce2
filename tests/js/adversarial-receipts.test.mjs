// Refunds by receipt through the npm package, against real Redis behind the real bridge (issue "No request admitted
// by accident", point 3 and "Refunds are receipts, not deltas"): a grant's result carries its receipt, `refund`
// gives back exactly that grant, and a forged or malformed receipt is refused without crediting anything.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Ratelimit } from "edgelimit";
import { startStack } from "./harness.mjs";

let stack;
let prefixes = 0;
before(async () => (stack = await startStack()));
after(() => stack.stop());

function ratelimit(limiter) {
  return new Ratelimit({ url: stack.url, token: stack.token, prefix: `r${++prefixes}`, limiter, cache: false });
}

test("a token bucket's refund gives back exactly the grant's tokens not refilled since", async () => {
  // One token per hour: between the grant and the refund a few ms refill a sliver, and the refund credits the
  // grant's cost less exactly that sliver, so the bucket is where it was before the grant.
  const bucket = ratelimit(Ratelimit.tokenBucket(1, "1 h", 10));
  const granted = await bucket.limit("k", { permits: 3 });
  assert.equal(granted.success, true);
  assert.equal(granted.remaining, 7);
  assert.match(granted.receipt, /^3:\d{13}$/, "3 permits at the server's unix ms");
  assert.equal(granted.results[0].receipt, granted.receipt);
  const refunded = await bucket.refund("k", granted.receipt);
  assert.equal(refunded.success, true);
  assert.deepEqual(
    refunded.results.map((r) => [r.success, r.remaining, r.limit]),
    [[true, 10, 10]],
  );
  assert.equal((await bucket.getRemaining("k")).remaining, 10);
});

test("a sliding log's receipt gives back its grant once, and no other grant", async () => {
  const log = ratelimit(Ratelimit.slidingLog(3, "1 h"));
  const first = await log.limit("k");
  const second = await log.limit("k", { permits: 2 });
  // A log's receipt: its permits, when the grant frees, and its id.
  assert.match(second.receipt, /^2:\d+-[0-9a-f]{16}$/);
  const refunded = await log.refund("k", second.receipt);
  assert.equal(refunded.results[0].remaining, 2, "the 2 permits of the second grant, not the first's");
  assert.equal((await log.refund("k", second.receipt)).success, false, "given back once");
  assert.equal((await log.getRemaining("k")).remaining, 2);
  assert.equal((await log.limit("k")).success, true);
  assert.ok(first.receipt !== second.receipt);
  const denied = await log.limit("k", { permits: 2 });
  assert.equal(denied.success, false);
  assert.equal(denied.receipt, undefined, "a denial has no receipt");
});

test("several limits: one receipt per limit, each given back under its own limit", async () => {
  const limits = ratelimit([Ratelimit.slidingLog(2, "1 h"), Ratelimit.gcra(1, "1 h", 5)]);
  const granted = await limits.limit("k");
  assert.equal(granted.success, true);
  assert.equal(granted.receipt, undefined, "one receipt cannot give back both grants");
  const receipts = granted.results.map((r) => r.receipt);
  assert.equal(receipts.length, 2);
  const refunded = await limits.refund("k", receipts);
  assert.deepEqual(
    refunded.results.map((r) => [r.success, r.remaining]),
    [[true, 2], [true, 5]],
  );
  await assert.rejects(limits.refund("k", receipts[0]), { code: "EDGELIMIT_INVALID_ARGUMENT" }, "one per limit");
  // A grant of limitAll is refunded under the limiters it was given.
  const other = [Ratelimit.fixedWindow(4, "1 h")];
  const extra = await limits.limitAll("k", other, { permits: 3 });
  assert.equal((await limits.refund("k", extra.receipt, other)).results[0].remaining, 4);
});

test("a forged receipt is refused and credits nothing", async () => {
  const bucket = ratelimit(Ratelimit.tokenBucket(1, "1 h", 10));
  const granted = await bucket.limit("k", { permits: 8 });
  const [, at] = granted.receipt.split(":");
  const future = `8:${Number(at) + 3_600_000}`;
  for (const forged of [future, `11:${at}`, "8:0000000000000abc"]) {
    await assert.rejects(bucket.refund("k", forged), (error) => {
      assert.equal(error.name, "EdgelimitError");
      assert.equal(error.code, "EDGELIMIT_INVALID_ARGUMENT", forged);
      assert.equal(error.storeUnavailable, false, "never absorbed by onError");
      assert.match(error.message, /receipt/, forged);
      assert.doesNotMatch(error.message, /user_script|script: [0-9a-f]{40}/, "no Lua internals");
      return true;
    });
  }
  // Malformed receipts are refused before any I/O.
  const huge = "8:" + "9".repeat(1 << 20);
  for (const malformed of ["", "8", "8:", "0:1", "8:a/b", "8:\u0000", "8:\uD800", huge, 42, null, {}, NaN, -1]) {
    await assert.rejects(bucket.refund("k", malformed), (error) => {
      assert.equal(error.code, "EDGELIMIT_INVALID_ARGUMENT", String(malformed).slice(0, 20));
      assert.ok(error.message.length < 400, "a huge receipt is not echoed");
      return true;
    });
  }
  assert.equal((await bucket.getRemaining("k")).remaining, 2, "nothing was credited");
});
