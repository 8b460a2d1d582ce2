// The npm package against foreign state and an outage, with the default fail-open policy (issue 18, point 2): a
// limiter key that another program took over rejects with EDGELIMIT_FOREIGN_STATE every time, never an allow; Redis
// stopped is the one failure `onError: "allow"` absorbs. Real Redis behind the real bridge (tests/js/harness.mjs).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Ratelimit } from "edgelimit";
import { startStack, upstashRedis } from "./harness.mjs";

let stack;
before(async () => (stack = await startStack()));
after(() => stack.stop());

test("a limiter key holding another type rejects with EDGELIMIT_FOREIGN_STATE, never an allow, under onError allow", async () => {
  const redis = upstashRedis(stack);
  const limits = new Ratelimit({
    url: stack.url,
    token: stack.token,
    prefix: "foreign",
    limiter: Ratelimit.tokenBucket(5, "1 s", 5),
    onError: "allow",
    cache: false,
  });
  assert.equal((await limits.limit("victim")).success, true);
  const keys = await redis.keys("foreign:*victim*");
  assert.ok(keys.length > 0, "the first decision wrote the bucket's state");
  for (const key of keys) {
    await redis.del(key);
    await redis.hset(key, { field: "value" });
  }
  for (let attempt = 0; attempt < 5; attempt += 1) {
    await assert.rejects(limits.limit("victim"), (error) => {
      assert.equal(error.name, "EdgelimitError");
      assert.equal(error.code, "EDGELIMIT_FOREIGN_STATE");
      assert.equal(error.class, "foreign-state");
      assert.equal(error.absorbable, false);
      assert.match(error.message, /WRONGTYPE/);
      assert.doesNotMatch(error.message, /user_script|[0-9a-f]{40}/);
      return true;
    });
  }
});

test("Redis stopped is absorbed: onError allow answers success with reason error and the store's code", async () => {
  const limits = new Ratelimit({
    url: stack.url,
    token: stack.token,
    prefix: "outage",
    limiter: Ratelimit.slidingLog(1, "1 h"),
    onError: "allow",
    cache: false,
  });
  await stack.stopRedis();
  try {
    for (let attempt = 0; attempt < 3; attempt += 1) {
      const result = await limits.limit("anyone");
      assert.equal(result.success, true);
      assert.equal(result.reason, "error");
      assert.deepEqual([result.remaining, result.reset, result.retryAfter], [0, 0, 0]);
      assert.equal(result.error.code, "EDGELIMIT_STORE_UNAVAILABLE");
      assert.equal(result.error.class, "store-unavailable");
      assert.equal(result.error.absorbable, true);
    }
  } finally {
    await stack.restartRedis();
  }
});
