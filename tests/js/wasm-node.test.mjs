// The built package's raw REST client in Node, imported by name ("edgelimit", resolved through the package's
// `exports` with the `node` condition) the way users import it, against the real bridge.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import * as edgelimit from "edgelimit";
import { revokedArray, startStack, startStalledEndpoint, throwingArray } from "./harness.mjs";
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

test("arguments of the wrong type are refused with a code, never a crash, a hang, a trap or another meaning", async () => {
  const client = new edgelimit.RestClient(stack.url, stack.token, 5000);
  // Each once threw outside the promise (Node exited), trapped the wasm, or was read as something else: a string
  // as its characters (keys "mykey" as five keys), a number as no arguments, a timeout modulo 2^32.
  for (const call of [
    () => client.command(null),
    () => client.command("PING"),
    () => client.command({ 0: "PING" }),
    () => client.eval("return 1", null, []),
    () => client.eval("return #KEYS", "mykey", []),
    () => client.eval("return 1", [], 5),
    () => client.eval(5, [], []),
    // Arrays the module reads item by item: a Proxy whose traps throw, a revoked one, one claiming 2^32 - 1 items.
    () => client.command(throwingArray(["PING"], "length")),
    () => client.command(throwingArray(["PING"], "0")),
    () => client.command(revokedArray()),
    () => client.command(new Proxy([], { get: (target, name) => (name === "length" ? 2 ** 32 - 1 : "PING") })),
  ]) {
    const error = await call().then((reply) => assert.fail(`accepted: ${reply}`), (e) => e);
    assert.deepEqual([error.code, error.storeUnavailable], ["EDGELIMIT_INVALID_ARGUMENT", false], `${call}: ${error}`);
  }
  for (const [url, token, timeout] of [[5, "t", 1000], [stack.url, {}, 1000], [stack.url, "t", 2 ** 32 + 5], [stack.url, "t", 1.5], [stack.url, "t", "300"], [stack.url, "t", 0]]) {
    assert.throws(() => new edgelimit.RestClient(url, token, timeout), { code: "EDGELIMIT_INVALID_ARGUMENT" }, `${url} ${token} ${timeout}`);
  }
  assert.equal(await client.command(["PING"]), "PONG", "the client still works");
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
