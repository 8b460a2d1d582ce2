// The package as a user gets it: `npm pack` of pkg/, installed into a fresh Node project (no network: the package
// has no dependencies), running the README's example block unchanged against the real bridge.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { after, before, test } from "node:test";
import { ROOT, startStack } from "./harness.mjs";

const run = promisify(execFile);

let stack;
let dir;
before(async () => {
  stack = await startStack();
  dir = mkdtempSync(join(tmpdir(), "edgelimit-fresh-project-"));
});
after(async () => {
  await stack.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** The npm example: the ```js block after its marker comment, the same in README.md and docs/npm.md (the
 * package's README). */
function readmeExample() {
  const [readme, guide] = ["README.md", "docs/npm.md"].map((file) => {
    const match = readFileSync(join(ROOT, file), "utf8").match(/<!-- npm-example[^>]*-->\n```js\n([\s\S]*?)```/);
    assert.ok(match, `${file} has the npm example block after its <!-- npm-example --> marker`);
    return match[1];
  });
  assert.equal(readme, guide, "README.md and docs/npm.md show the same npm example");
  return readme;
}

test("a fresh Node project installs the packed package and runs the README example unchanged", async () => {
  const { stdout: tarball } = await run("npm", ["pack", join(ROOT, "pkg"), "--pack-destination", dir, "--silent"]);
  const project = join(dir, "project");
  mkdirSync(project);
  writeFileSync(join(project, "package.json"), JSON.stringify({ name: "fresh", private: true, type: "module" }));
  await run("npm", ["install", "--offline", "--no-audit", "--no-fund", "--loglevel=error", join(dir, tarball.trim())], {
    cwd: project,
  });
  const installed = readdirSync(join(project, "node_modules/edgelimit")).sort();
  const manifest = JSON.parse(readFileSync(join(project, "node_modules/edgelimit/package.json"), "utf8"));
  for (const field of ["repository", "homepage", "bugs", "license", "keywords", "exports", "types", "sideEffects"]) {
    assert.ok(manifest[field], `package.json has ${field}`);
  }
  for (const file of ["README.md", "browser.js", "core.js", "core_bg.wasm", "index.d.ts", "node.js", "ratelimit.js", "workerd.js"]) {
    assert.ok(installed.includes(file), `${file} is in the package (it has ${installed})`);
  }

  writeFileSync(join(project, "example.mjs"), readmeExample());
  const env = { ...process.env, EDGELIMIT_URL: stack.url, EDGELIMIT_TOKEN: stack.token };
  const outputs = [];
  for (let i = 0; i < 2; i++) outputs.push((await run("node", ["example.mjs"], { cwd: project, env })).stdout);
  assert.deepEqual(outputs, ["allowed, 9 left\n", "allowed, 8 left\n"]);

  // The types: a strict TypeScript consumer compiles, and misuses do not (each @ts-expect-error must be needed).
  writeFileSync(join(project, "tsconfig.json"), JSON.stringify(TSCONFIG));
  writeFileSync(join(project, "consumer.ts"), TYPED_CONSUMER);
  const tsc = join(ROOT, "node_modules/typescript/bin/tsc");
  const compiled = await run("node", [tsc, "-p", project]).catch((e) => e);
  assert.equal(compiled.code ?? 0, 0, `tsc:\n${compiled.stdout}${compiled.stderr}`);
});

const TSCONFIG = {
  compilerOptions: { strict: true, noEmit: true, target: "es2022", module: "nodenext", moduleResolution: "nodenext", types: [] },
  files: ["consumer.ts"],
};

const TYPED_CONSUMER = `
import { Ratelimit, type RatelimitResponse, type EdgelimitError } from "edgelimit";
const ratelimit = new Ratelimit({
  url: "http://127.0.0.1:8079",
  token: "dev-token",
  limiter: [Ratelimit.slidingLog(10, "10 s"), { ...Ratelimit.tokenBucket(5, "1 s", 20), name: "bucket" }],
  timeout: 500,
  onError: "deny",
  cache: 1000,
});
export async function check(ip: string): Promise<number> {
  const result: RatelimitResponse = await ratelimit.limit(ip, { permits: 2 });
  const reason: "decided" | "cache" | "reserved" | "insurance" | "timeout" | "error" = result.reason;
  const code: string | undefined = (result.error as EdgelimitError | undefined)?.code;
  const all = await ratelimit.limitAll(ip, [Ratelimit.gcra(10, "1 s", 20), Ratelimit.fixedWindow(100, "1 h")]);
  const handle = ratelimit.rateLimiter("api", { clientId: "a" });
  const set: boolean = await handle.trySetRate(10, "1 s", { mode: "perClient", keepAlive: "1 h" });
  const config = await handle.getConfig();
  void reason, code, set, config?.keepAlive;
  return all.results.length + (await ratelimit.getRemaining(ip)).remaining + result.retryAfter;
}
// @ts-expect-error onError takes "allow" | "deny" | "throw"
new Ratelimit({ url: "u", token: "t", limiter: Ratelimit.fixedWindow(1, "1 s"), onError: "ignore" });
// @ts-expect-error the limiter is required
new Ratelimit({ url: "u", token: "t" });
// @ts-expect-error a duration needs its unit: "10" would throw at run time
Ratelimit.slidingLog(10, "10");
// @ts-expect-error permits go in an options object
ratelimit.limit("ip", 2);
`;
