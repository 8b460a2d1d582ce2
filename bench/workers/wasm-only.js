// A floor for bench/worker.mjs's cold start: the baseline proxy, plus edgelimit's Worker module compiled and
// instantiated as the edgelimit Worker does it, and never called. What this Worker adds to the baseline's cold start
// is what workerd spends on the wasm module itself, before edgelimit reads its configuration or decides anything.
import wasmModule from "../../worker/wasm/core_bg.wasm";
import { initSync } from "../../worker/wasm/core.js";

initSync({ module: wasmModule });

export default {
  fetch(request, env) {
    const url = new URL(request.url);
    const target = new URL(url.pathname + url.search, env.ORIGIN);
    return fetch(new Request(target, request));
  },
};
