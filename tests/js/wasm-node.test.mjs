// The built package's raw REST client in Node, imported by name ("edgelimit", resolved through the package's
// `exports` with the `node` condition) the way users import it, against the real bridge.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import * as edgelimit from "edgelimit";
import { startStack, startStalledEndpoint } from "./harness.mjs";
import { EXPECTED, EXPECTED_RATELIMIT, ratelimitSmoke, smoke } from "./wasm-smoke.mjs";

let stack;
before(async () => (stack = await startStack()));
after(() => stack.stop());

test("the wasm core loads in Node and talks to the bridge", async () => {
  assert.deepEqual(await smoke(edgelimit, stack.url, stack.token), EXPECTED);
});

test("integer arguments are sent as their digits, exactly up to 2^53 - 1; other numbers are refused", async () => {
  const client = new edgelimit.RestClient(stack.url, stack.token, 5000);
  const key = `int-args-${Date.now()}`;
  assert.equal(await client.command(["SET", key, Number.MAX_SAFE_INTEGER]), "OK");
  assert.equal(await client.command(["GET", key]), "9007199254740991");
  assert.equal(await client.command(["SET", key, -0]), "OK");
  assert.equal(await client.command(["GET", key]), "0");
  assert.equal(await client.command(["INCRBY", key, -42]), -42);
  for (const bad of [1.5, 2 ** 53, NaN, Infinity]) {
    const error = await client.command(["SET", key, bad]).catch((e) => e);
    assert.equal(error.code, "EDGELIMIT_INVALID_ARGUMENT", `${bad}: ${error}`);
    assert.match(error.message, /command\[2\] must be a string or an integer/);
  }
});

test("a stalled endpoint times out at the configured timeout, with a stable code", async () => {
  const stalled = await startStalledEndpoint();
  try {
    const started = Date.now();
    const error = await new edgelimit.RestClient(stalled.url, "t", 200).command(["PING"]).catch((e) => e);
    assert.equal(error.code, "EDGELIMIT_TIMEOUT", String(error));
    assert.match(error.message, /within 200 ms/);
    // Lower bound only: it must not give up early. How late it may be is a benchmark's business, not a test's.
    assert.ok(Date.now() - started >= 195);
  } finally {
    stalled.stop();
  }
});

test("Ratelimit: every algorithm, the cache, limitAll and the handle, as the workerd smoke runs them", async () => {
  assert.deepEqual(await ratelimitSmoke(edgelimit, stack.url, stack.token, "node"), EXPECTED_RATELIMIT);
});
