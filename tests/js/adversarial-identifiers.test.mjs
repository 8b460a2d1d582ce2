// Adversarial, the npm side of tests/tests/adversarial/identifiers.rs: identifiers from JS are exact. Lone surrogates
// are not folded into U+FFFD, a 1 MiB identifier is limited exactly by a fail-open limit (not refused by the endpoint
// and absorbed), an identifier with a NUL cannot poison another's block-cache entry, and non-strings are refused.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Ratelimit } from "edgelimit";
import { startStack } from "./harness.mjs";

let stack;
let prefixes = 0;
before(async () => (stack = await startStack()));
after(() => stack.stop());

function ratelimit(limiter, options = {}) {
  return new Ratelimit({ url: stack.url, token: stack.token, prefix: `ids${++prefixes}`, limiter, onError: "allow", ...options });
}

test('"\\uD800", "\\uDC00" and "\\uFFFD" are three identifiers', async () => {
  const limits = ratelimit(Ratelimit.slidingLog(1, "1 h"), { cache: false });
  const ids = ["\uD800", "\uDC00", "\uFFFD", "a\uD800b", "a\uFFFDb"];
  for (const id of ids) assert.equal((await limits.limit(id)).success, true, JSON.stringify(id));
  for (const id of ids) {
    const denied = await limits.limit(id);
    assert.deepEqual([denied.success, denied.reason], [false, "decided"], JSON.stringify(id));
  }
});

test("a 1 MiB identifier is limited exactly by a fail-open limit", async () => {
  const limits = ratelimit(Ratelimit.slidingLog(1, "1 h"), { cache: false });
  const huge = "A".repeat(1 << 20);
  const first = await limits.limit(huge);
  assert.deepEqual([first.success, first.reason], [true, "decided"]);
  const second = await limits.limit(huge);
  assert.deepEqual([second.success, second.reason], [false, "decided"]);
  assert.equal((await limits.limit(`${huge}A`)).success, true, "one byte more is another identifier");
});

test("an identifier with a NUL cannot answer another's first request from the block cache", async () => {
  const limits = ratelimit(Ratelimit.slidingLog(1, "10 s"));
  const attacker = "victim\0fixed_window-10000ms";
  await limits.limit(attacker);
  assert.equal((await limits.limit(attacker)).success, false);
  const victim = await limits.limitAll("victim", [Ratelimit.fixedWindow(5, "10 s"), Ratelimit.slidingLog(1, "10 s")]);
  assert.deepEqual([victim.success, victim.reason], [true, "decided"]);
});

test("identifiers that are not strings are refused before any request", async () => {
  const limits = ratelimit(Ratelimit.slidingLog(1, "1 h"));
  for (const id of [123, null, undefined, {}, ["a"], NaN]) {
    const error = await limits.limit(id).then(
      (result) => assert.fail(`${String(id)} was decided: ${JSON.stringify(result)}`),
      (e) => e,
    );
    assert.equal(error.code, "EDGELIMIT_INVALID_ARGUMENT", String(id));
    assert.match(error.message, /identifier must be a string/);
  }
});
