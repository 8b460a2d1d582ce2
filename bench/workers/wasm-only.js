// A floor for bench/worker.mjs's cold start: the baseline proxy plus edgelimit's wasm module, instantiated as the
// edgelimit Worker does it and never called: what workerd spends on the module itself.
import wasmModule from "../../worker/wasm/core_bg.wasm";
import { initSync } from "../../worker/wasm/core.js";

initSync({ module: wasmModule });

export { default } from "./no-limiter.js";
