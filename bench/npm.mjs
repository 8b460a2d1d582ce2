// The npm package from Node next to @upstash/ratelimit, on one bridge and Redis: its size (wasm and JS, raw and
// gzip), cold start to the first decision (a fresh Node, a fresh workerd), and decisions/s per algorithm both have,
// IN_FLIGHT at a time, every request allowed, caches off; @upstash measured with and without auto-pipelining.
// Run: edgelimit-bench (--json), or scripts/build-wasm && cargo build --release -p edgelimit-cli && node bench/npm.mjs
//   [--quick] [--url U --token T]; ROUNDS, SECONDS and IN_FLIGHT in the environment override the sizes.
import { execFile } from "node:child_process";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { gzipSync } from "node:zlib";
import { benchOptions, closedLoop, connectOrStartStack, fastestOfRounds, quantile } from "./options.mjs";

const { packageModules, ROOT } = await import("../tests/js/harness.mjs");
const { Ratelimit } = await import("edgelimit");
const upstash = await import("@upstash/ratelimit");
const { Redis } = await import("@upstash/redis");
const { Miniflare } = await import("miniflare");

const options = benchOptions();
const ROUNDS = Number(process.env.ROUNDS ?? (options.quick ? 1 : 3));
const SECONDS = Number(process.env.SECONDS ?? (options.quick ? 0.3 : 3));
const IN_FLIGHT = Number(process.env.IN_FLIGHT ?? 8);
const COLD_STARTS = options.quick ? 1 : 5;
const run = promisify(execFile);
const median = (values) => quantile([...values].sort((a, b) => a - b), 0.5);

function packageSize() {
  const pkg = join(ROOT, "pkg");
  const wasm = readFileSync(join(pkg, "core_bg.wasm"));
  const js = readdirSync(pkg, { recursive: true })
    .filter((f) => f.endsWith(".js"))
    .map((f) => readFileSync(join(pkg, f)));
  return {
    wasmRaw: wasm.length,
    wasmGzip: gzipSync(wasm, { level: 9 }).length,
    jsRaw: js.reduce((n, b) => n + b.length, 0),
    jsGzip: js.reduce((n, b) => n + gzipSync(b, { level: 9 }).length, 0),
    types: statSync(join(pkg, "index.d.ts")).size,
  };
}

/** A fresh Node process: import, construct, first decision. Reports ms from the process's own start. */
async function nodeColdStart(stack, which) {
  const script =
    which === "edgelimit"
      ? `const { Ratelimit } = await import("edgelimit");
         const r = new Ratelimit({ url: process.env.URL, token: process.env.TOKEN, limiter: Ratelimit.fixedWindow(1e8, "1 h"), prefix: "cold" + Math.random() });
         await r.limit("id");`
      : `const { Ratelimit } = await import("@upstash/ratelimit"); const { Redis } = await import("@upstash/redis");
         const r = new Ratelimit({ redis: new Redis({ url: process.env.URL, token: process.env.TOKEN, enableTelemetry: false }), limiter: Ratelimit.fixedWindow(1e8, "1 h"), prefix: "cold" + Math.random(), ephemeralCache: false });
         await r.limit("id");`;
  const wrapped = `${script}\nprocess.stdout.write(String(performance.now()));`;
  const { stdout } = await run("node", ["--input-type=module", "-e", wrapped], {
    cwd: ROOT,
    env: { ...process.env, URL: stack.url, TOKEN: stack.token },
  });
  return Number(stdout);
}

/** A fresh workerd (Miniflare): from construction until the first decision's response is back. */
async function workerdColdStart(stack, which) {
  const modules = which === "edgelimit" ? packageModules() : [];
  const body =
    which === "edgelimit"
      ? `import { Ratelimit } from "./edgelimit/workerd.js";
         export default { async fetch(req, env) {
           const r = new Ratelimit({ url: env.URL, token: env.TOKEN, limiter: Ratelimit.fixedWindow(1e8, "1 h") });
           return Response.json(await r.limit("id"));
         } };`
      : `export default { async fetch(req, env) { return new Response("no limiter"); } };`;
  const started = performance.now();
  const mf = new Miniflare({
    compatibilityDate: "2025-09-01",
    modulesRoot: ROOT,
    modules: [{ type: "ESModule", path: join(ROOT, "worker.mjs"), contents: body }, ...modules],
    bindings: { URL: stack.url, TOKEN: stack.token },
    // Whatever workerd prints goes to stderr: stdout carries the report only.
    handleRuntimeStdio(stdout, stderr) {
      stdout.pipe(process.stderr);
      stderr.pipe(process.stderr);
    },
  });
  const response = await mf.dispatchFetch("http://bench.test/");
  await response.text();
  const elapsed = performance.now() - started;
  await mf.dispose();
  return elapsed;
}

/** Cold starts, median of `COLD_STARTS` each, ms. */
async function coldStarts(stack) {
  const cold = { node: { edgelimit: [], upstash: [] }, workerd: { edgelimit: [], none: [] } };
  for (let i = 0; i < COLD_STARTS; i++) {
    cold.node.edgelimit.push(await nodeColdStart(stack, "edgelimit"));
    cold.node.upstash.push(await nodeColdStart(stack, "upstash"));
    cold.workerd.edgelimit.push(await workerdColdStart(stack, "edgelimit"));
    cold.workerd.none.push(await workerdColdStart(stack, "none"));
  }
  return {
    samples: COLD_STARTS,
    nodeEdgelimitMs: median(cold.node.edgelimit),
    nodeUpstashMs: median(cold.node.upstash),
    workerdEdgelimitMs: median(cold.workerd.edgelimit),
    workerdNoLimiterMs: median(cold.workerd.none),
  };
}

/** Per algorithm both libraries have: the best of `ROUNDS` runs of each contender. */
async function decisionsPerSecond(stack) {
  const redis = new Redis({ url: stack.url, token: stack.token, enableTelemetry: false });
  const unpipelined = new Redis({ url: stack.url, token: stack.token, enableTelemetry: false, enableAutoPipelining: false });
  const algorithms = [];
  for (const [algorithm, ours, theirs] of [
    ["fixed window", Ratelimit.fixedWindow(1e8, "1 h"), upstash.Ratelimit.fixedWindow(1e8, "1 h")],
    ["sliding window", Ratelimit.slidingWindow(1e8, "1 h"), upstash.Ratelimit.slidingWindow(1e8, "1 h")],
    ["token bucket", Ratelimit.tokenBucket(1e8, "1 h", 1e8), upstash.Ratelimit.tokenBucket(1e8, "1 h", 1e8)],
  ]) {
    const mine = new Ratelimit({ url: stack.url, token: stack.token, limiter: ours, prefix: "bench", cache: false });
    const peer = new upstash.Ratelimit({ redis, limiter: theirs, prefix: "bench-upstash", ephemeralCache: false });
    const plain = new upstash.Ratelimit({ redis: unpipelined, limiter: theirs, prefix: "bench-upstash", ephemeralCache: false });
    const contenders = { edgelimit: mine, upstashPlain: plain, upstashPipelined: peer };
    const best = await fastestOfRounds(Object.keys(contenders), ROUNDS, (who) =>
      closedLoop(IN_FLIGHT, SECONDS, (id) => contenders[who].limit(id)),
    );
    algorithms.push({ algorithm, ...best });
  }
  return { inFlight: IN_FLIGHT, seconds: SECONDS, rounds: ROUNDS, algorithms };
}

const stack = await connectOrStartStack(options);
try {
  const report = { package: packageSize(), coldStart: await coldStarts(stack), throughput: await decisionsPerSecond(stack) };
  process.stdout.write(`${JSON.stringify(report, null, options.json ? 0 : 2)}\n`);
} finally {
  await stack.stop();
}
