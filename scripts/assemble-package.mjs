// Writes pkg/package.json for the wasm-bindgen output, taking name and version from the core crate.
import { readFileSync, writeFileSync } from "node:fs";

const cargo = readFileSync(new URL("../Cargo.toml", import.meta.url), "utf8");
const version = cargo.match(/^\[workspace\.package\][^[]*?^version = "([^"]+)"/ms)[1];

const manifest = {
  name: "edgelimit",
  version,
  description: "Exact distributed rate limiting for the edge: one round trip, one atomic Lua script.",
  license: "MIT OR Apache-2.0",
  type: "module",
  main: "./edgelimit.js",
  types: "./edgelimit.d.ts",
  exports: {
    ".": { types: "./edgelimit.d.ts", default: "./edgelimit.js" },
    "./edgelimit_bg.wasm": "./edgelimit_bg.wasm",
  },
  files: ["edgelimit.js", "edgelimit.d.ts", "edgelimit_bg.wasm", "edgelimit_bg.wasm.d.ts"],
  sideEffects: false,
};
writeFileSync(new URL("../pkg/package.json", import.meta.url), JSON.stringify(manifest, null, 2) + "\n");
