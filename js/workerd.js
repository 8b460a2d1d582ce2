// Entry point for Cloudflare Workers (workerd): the bundler hands over the wasm as a compiled WebAssembly.Module
// (Workers may not compile wasm from bytes at runtime, nor fetch it by URL), instantiated synchronously at import.
import wasm from "./core_bg.wasm";
import { initSync } from "./core.js";

initSync({ module: wasm });

export * from "./ratelimit.js";
