// Completes pkg/ after wasm-bindgen: copies the hand-written layer (js/) and writes package.json, taking name and
// version from the core crate. The `exports` conditions pick how the wasm is loaded:
//   workerd/worker  import the .wasm as a compiled WebAssembly.Module (the only way Workers allow), initSync
//   node            read the .wasm from the package folder, initSync
//   browser/default fetch it next to the module (streaming compile), top-level await
import { copyFileSync, readdirSync, readFileSync, writeFileSync } from "node:fs";

const root = new URL("../", import.meta.url);
const pkg = new URL("pkg/", root);
for (const file of readdirSync(new URL("js/", root))) {
  copyFileSync(new URL(`js/${file}`, root), new URL(file, pkg));
}

// The package's README is docs/npm.md, its links to the other guides made absolute (they are not in the package).
const cargo = readFileSync(new URL("Cargo.toml", root), "utf8");
const repository = cargo.match(/^repository = "([^"]+)"/m)[1];
const guide = readFileSync(new URL("docs/npm.md", root), "utf8")
  .replace(/<!--.*?-->\n/g, "")
  .replace(/\]\((?!https?:|#)([^)]+)\)/g, (_, link) => `](${new URL(link, `${repository}/blob/main/docs/`)})`);
writeFileSync(new URL("README.md", pkg), guide);

const version = cargo.match(/^\[workspace\.package\][^[]*?^version = "([^"]+)"/ms)[1];
const entry = (file) => ({ types: "./index.d.ts", default: file });

const manifest = {
  name: "edgelimit",
  version,
  description: "Exact distributed rate limiting for the edge: one round trip, one atomic Lua script.",
  keywords: ["rate limit", "ratelimit", "redis", "upstash", "cloudflare workers", "wasm", "gcra", "token bucket"],
  license: "MIT OR Apache-2.0",
  // One place to change: the workspace's Cargo.toml.
  repository: { type: "git", url: `git+${repository}.git` },
  homepage: `${repository}/blob/main/docs/npm.md`,
  bugs: { url: `${repository}/issues` },
  type: "module",
  types: "./index.d.ts",
  main: "./node.js",
  browser: "./browser.js",
  exports: {
    ".": {
      workerd: entry("./workerd.js"),
      worker: entry("./workerd.js"),
      browser: entry("./browser.js"),
      node: entry("./node.js"),
      default: entry("./browser.js"),
    },
    "./core_bg.wasm": "./core_bg.wasm",
    "./package.json": "./package.json",
  },
  files: ["*.js", "*.d.ts", "core_bg.wasm", "snippets/", "README.md"],
  engines: { node: ">=20" },
  sideEffects: ["./node.js", "./workerd.js", "./browser.js"],
};
writeFileSync(new URL("package.json", pkg), JSON.stringify(manifest, null, 2) + "\n");
