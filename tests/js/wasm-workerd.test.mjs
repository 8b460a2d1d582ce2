// The built package's wasm module inside real workerd (Miniflare 4), fetching the real bridge on loopback.
// The module is imported as a compiled WebAssembly.Module and instantiated with initSync, never by URL.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { Miniflare } from "miniflare";
import { ROOT, startStack } from "./harness.mjs";
import { EXPECTED } from "./wasm-smoke.mjs";

const WORKER = `
import * as edgelimit from "./edgelimit.js";
import wasm from "./edgelimit_bg.wasm";
import { smoke } from "./wasm-smoke.mjs";
edgelimit.initSync({ module: wasm });
export default {
  async fetch(request, env) {
    return Response.json(await smoke(edgelimit, env.BRIDGE_URL, env.BRIDGE_TOKEN));
  },
};`;

let stack;
let mf;
before(async () => {
  stack = await startStack();
  mf = new Miniflare({
    compatibilityDate: "2025-09-01",
    modulesRoot: ROOT,
    modules: [
      { type: "ESModule", path: join(ROOT, "worker.mjs"), contents: WORKER },
      { type: "ESModule", path: join(ROOT, "edgelimit.js"), contents: readFileSync(join(ROOT, "pkg/edgelimit.js")) },
      { type: "ESModule", path: join(ROOT, "wasm-smoke.mjs"), contents: readFileSync(join(ROOT, "tests/js/wasm-smoke.mjs")) },
      { type: "CompiledWasm", path: join(ROOT, "edgelimit_bg.wasm"), contents: readFileSync(join(ROOT, "pkg/edgelimit_bg.wasm")) },
    ],
    bindings: { BRIDGE_URL: stack.url, BRIDGE_TOKEN: stack.token },
  });
});
after(async () => {
  await mf?.dispose();
  await stack?.stop();
});

test("the wasm core loads in workerd and talks to the bridge", async () => {
  const response = await mf.dispatchFetch("http://worker.test/");
  assert.equal(response.status, 200, await response.clone().text());
  assert.deepEqual(await response.json(), EXPECTED);
});
