// The built package's wasm module, loaded in Node the way the package's users load it, against the real bridge.
import assert from "node:assert/strict";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { ROOT, startStack } from "./harness.mjs";
import { EXPECTED, smoke } from "./wasm-smoke.mjs";

let stack;
before(async () => (stack = await startStack()));
after(() => stack.stop());

test("the wasm core loads in Node and talks to the bridge", async () => {
  const pkg = await import(join(ROOT, "pkg/edgelimit.js"));
  pkg.initSync({ module: readFileSync(join(ROOT, "pkg/edgelimit_bg.wasm")) });
  assert.deepEqual(await smoke(pkg, stack.url, stack.token), EXPECTED);
});

test("a stalled endpoint times out at the configured timeout, with a stable code", async () => {
  const { RestClient } = await import(join(ROOT, "pkg/edgelimit.js"));
  // Accepts connections and never answers: a store that hangs.
  const sockets = new Set();
  const stalled = createServer((socket) => sockets.add(socket)).listen(0, "127.0.0.1");
  await once(stalled, "listening");
  try {
    const started = Date.now();
    const error = await new RestClient(`http://127.0.0.1:${stalled.address().port}`, "t", 200)
      .command(["PING"])
      .catch((e) => e);
    assert.equal(error.code, "EDGELIMIT_TIMEOUT", String(error));
    assert.match(error.message, /within 200 ms/);
    // Lower bound only: it must not give up early. How late it may be is a benchmark's business, not a test's.
    assert.ok(Date.now() - started >= 195);
  } finally {
    sockets.forEach((socket) => socket.destroy());
    stalled.close();
  }
});
