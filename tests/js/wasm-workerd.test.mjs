// The built package inside real workerd (Miniflare 4), fetching the real bridge on loopback. The Worker imports the
// package's `workerd` entry, which takes the wasm as a compiled WebAssembly.Module (as wrangler bundles it) and
// instantiates it with initSync: never by URL, never from bytes at runtime.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { Miniflare } from "miniflare";
import { packageModules, ROOT, startStack } from "./harness.mjs";
import { EXPECTED, EXPECTED_RATELIMIT, ratelimitSmoke, smoke } from "./wasm-smoke.mjs";

const WORKER = `
import * as edgelimit from "./edgelimit/workerd.js";
import { ratelimitSmoke, smoke } from "./wasm-smoke.mjs";
export default {
  async fetch(request, env) {
    const which = new URL(request.url).pathname;
    const result = which === "/ratelimit"
      ? await ratelimitSmoke(edgelimit, env.BRIDGE_URL, env.BRIDGE_TOKEN, "workerd")
      : await smoke(edgelimit, env.BRIDGE_URL, env.BRIDGE_TOKEN);
    return Response.json(result);
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
      { type: "ESModule", path: join(ROOT, "wasm-smoke.mjs"), contents: readFileSync(join(ROOT, "tests/js/wasm-smoke.mjs")) },
      ...packageModules(),
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

test("Ratelimit decides in workerd exactly as in Node", async () => {
  const response = await mf.dispatchFetch("http://worker.test/ratelimit");
  assert.equal(response.status, 200, await response.clone().text());
  assert.deepEqual(await response.json(), EXPECTED_RATELIMIT);
});
