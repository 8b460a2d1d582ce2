// Entry point for browsers (and bundlers, Deno): the wasm is fetched next to this file and compiled with
// streaming instantiation; the top-level await makes the API ready when the import resolves.
import init from "./core.js";

await init({ module_or_path: new URL("./core_bg.wasm", import.meta.url) });

export * from "./ratelimit.js";
