// Entry point for Node: the wasm module is read from this package's folder and compiled at import, so the API is
// ready as soon as the import resolves.
import { readFileSync } from "node:fs";
import { initSync } from "./core.js";

initSync({ module: readFileSync(new URL("./core_bg.wasm", import.meta.url)) });

export * from "./ratelimit.js";
