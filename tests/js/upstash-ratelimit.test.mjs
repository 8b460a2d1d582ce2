// The official @upstash/ratelimit, unmodified, against the edgelimit bridge. Its scripts carry Upstash's
// `#!lua flags=allow-key-locking` shebang, which stock Redis rejects: this is the bridge's shebang rewriting and
// SHA1 aliasing at work, end to end.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Ratelimit } from "@upstash/ratelimit";
import { startStack, upstashRedis } from "./harness.mjs";

let stack;
let redis;
before(async () => {
  stack = await startStack();
  redis = upstashRedis(stack);
});
after(() => stack.stop());

for (const [name, limiter] of [
  ["fixedWindow", Ratelimit.fixedWindow(5, "60 s")],
  ["slidingWindow", Ratelimit.slidingWindow(5, "60 s")],
  ["tokenBucket", Ratelimit.tokenBucket(1, "60 s", 5)],
]) {
  test(`${name}: five allowed, the sixth denied, also after a script cache flush`, async () => {
    // @upstash/ratelimit's windows are aligned minutes of the caller's clock: six calls straddling a minute's end
    // would count in two windows (a fresh-clone run hit one). Start clear of the edge: the calls take well under 5 s.
    const intoMinute = Date.now() % 60_000;
    if (intoMinute > 55_000) await new Promise((resolve) => setTimeout(resolve, 60_000 - intoMinute + 50));
    const ratelimit = new Ratelimit({ redis, limiter, prefix: `compat-${name}`, ephemeralCache: false });
    const results = [];
    for (let i = 0; i < 6; i++) results.push(await ratelimit.limit("client-a"));
    assert.deepEqual(
      results.map((r) => [r.success, r.remaining]),
      [[true, 4], [true, 3], [true, 2], [true, 1], [true, 0], [false, 0]],
    );
    assert.ok(results[5].reset > Date.now(), "reset lies in the future");
    // Another identifier has its own budget.
    assert.equal((await ratelimit.limit("client-b")).success, true);

    await redis.scriptFlush();
    assert.equal((await ratelimit.limit("client-a")).success, false, "NOSCRIPT fallback still sees the state");
    assert.equal((await ratelimit.getRemaining("client-b")).remaining, 4);
  });
}
