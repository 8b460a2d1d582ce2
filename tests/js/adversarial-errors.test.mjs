// Adversarial, the npm side of tests/tests/adversarial/errors.rs: a fail-open Ratelimit (onError "allow") in Node
// against real Redis behind the real bridge. State another program put under a limit's key is reported every time,
// never turned into "allowed"; only an unavailable store (Redis stopped) is absorbed.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Ratelimit } from "edgelimit";
import { startStack, upstashRedis } from "./harness.mjs";

let stack;
before(async () => (stack = await startStack()));
after(() => stack.stop());

test("foreign state under a fail-open limit's key rejects with EDGELIMIT_FOREIGN_STATE, every time", async () => {
  const limits = new Ratelimit({ url: stack.url, token: stack.token, prefix: "foreign", limiter: Ratelimit.tokenBucket(5, "1 s", 5), onError: "allow" });
  // Another program's hash where the token bucket keeps its string (key: <prefix>:{<algorithm>-<interval>}:<id>).
  await upstashRedis(stack).hset("foreign:{token_bucket-1000ms}:victim", { f: "v" });
  for (let i = 0; i < 3; i++) {
    const error = await limits.limit("victim").then(
      (result) => assert.fail(`a fail-open limit allowed over foreign state: ${JSON.stringify(result)}`),
      (e) => e,
    );
    assert.deepEqual([error.name, error.code, error.storeUnavailable], ["EdgelimitError", "EDGELIMIT_FOREIGN_STATE", false]);
    assert.match(error.message, /WRONGTYPE/);
    assert.doesNotMatch(error.message, /user_script|[0-9a-f]{40}/);
  }
});

test("Redis stopped behind the bridge is absorbed: allowed, reason 'error', the error marked storeUnavailable", async () => {
  const limits = new Ratelimit({ url: stack.url, token: stack.token, prefix: "down", limiter: Ratelimit.gcra(1, "1 s"), onError: "allow" });
  await stack.stopRedis();
  try {
    const result = await limits.limit("ip");
    assert.deepEqual([result.success, result.reason, result.error.code, result.error.storeUnavailable], [true, "error", "EDGELIMIT_ENDPOINT", true]);
  } finally {
    await stack.restartRedis();
  }
});

test("options inherited from a polluted Object.prototype are not read: decisions stay exact, nothing is absorbed", async () => {
  // Each would fail every call locally (a 1 ms timeout) or change what a call takes, if read through the prototype.
  const polluted = { timeout: 1, permits: 2, prefix: "polluted", onError: "allow" };
  Object.assign(Object.prototype, polluted);
  try {
    const limits = new Ratelimit({ url: stack.url, token: stack.token, prefix: "own", limiter: Ratelimit.fixedWindow(2, "1 m") });
    const results = [];
    for (let i = 0; i < 3; i++) results.push(await limits.limit("client", {}));
    assert.deepEqual(results.map((r) => [r.success, r.reason, r.remaining]), [[true, "decided", 1], [true, "decided", 0], [false, "decided", 0]]);
  } finally {
    for (const name of Object.keys(polluted)) delete Object.prototype[name];
  }
});
