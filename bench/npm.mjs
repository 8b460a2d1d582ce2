// The npm package measured from Node, next to @upstash/ratelimit in the same run, on the same bridge and Redis:
//   - package size: the wasm (raw, gzip) and the JS;
//   - cold start: a fresh process (Node) or a fresh workerd (Miniflare) until the first decision is back;
//   - decisions per second and latency (p50, p99) through the bridge, `IN_FLIGHT` requests at a time, per
//     algorithm both libraries have. Limits are so high that every request is allowed: this measures the decision,
//     not the block cache (off on both sides). @upstash/redis auto-pipelines by default (commands issued in the
//     same tick share one HTTP request), and so does edgelimit (coalescing, its default; bench/coalescing.mjs
//     compares both ways at 1, 8 and 64 in flight): @upstash is measured both ways.
// Not a test: numbers on a shared machine move. Ratios between contenders measured in one run are what to read.
//
// Run: `edgelimit-bench` (scripts/bench) runs it with --json against its own bridge and tabulates the numbers.
// Alone: scripts/build-wasm && cargo build --release -p edgelimit-cli && node bench/npm.mjs   (Markdown tables)
//   --json               print one JSON object on stdout instead of tables (the shape edgelimit-bench reads)
//   --quick              tiny sizes (1 round of 0.3 s, 1 cold start each): checks the script, not numbers to read
//   --url U --token T    use this bridge instead of starting a redis-server and bridge (with EDGELIMIT_BIN,
//                        default target/release/edgelimit)
//   ROUNDS, SECONDS and IN_FLIGHT in the environment override the sizes.
import { execFile } from "node:child_process";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { gzipSync } from "node:zlib";
import { benchOptions, connectOrStartStack, quantile } from "./options.mjs";

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
const fmt = (n, digits = 1) => n.toFixed(digits);

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

/** `IN_FLIGHT` loops calling `decide` for `SECONDS`; requests, decisions per second and latency quantiles (ms). */
async function throughput(decide) {
  const latencies = [];
  const started = performance.now();
  const deadline = started + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async (_, lane) => {
      let i = 0;
      while (performance.now() < deadline) {
        const start = performance.now();
        const result = await decide(`lane-${lane}-${i++ % 100}`);
        if (!result.success) throw new Error(`a bench request was denied: ${JSON.stringify(result)}`);
        latencies.push(performance.now() - start);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  return {
    requests: latencies.length,
    perSecond: latencies.length / seconds,
    p50Ms: quantile(latencies, 0.5),
    p99Ms: quantile(latencies, 0.99),
  };
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
    const contenders = { edgelimit: (id) => mine.limit(id), upstashPlain: (id) => plain.limit(id), upstashPipelined: (id) => peer.limit(id) };
    const best = {};
    for (let round = 0; round < ROUNDS; round++) {
      // Rotate who goes first, so no one always runs on a warmer (or busier) machine.
      const names = Object.keys(contenders);
      const order = names.map((_, i) => names[(i + round) % names.length]);
      for (const who of order) {
        const result = await throughput(contenders[who]);
        if (!best[who] || result.perSecond > best[who].perSecond) best[who] = result;
      }
    }
    algorithms.push({ algorithm, ...best });
  }
  return { inFlight: IN_FLIGHT, seconds: SECONDS, rounds: ROUNDS, algorithms };
}

/** The report as Markdown tables. */
function printTables(report) {
  const { package: size, coldStart: cold, throughput: flow } = report;
  console.log("## Package size\n");
  console.log("| part | raw bytes | gzip bytes |\n|---|---|---|");
  console.log(`| core_bg.wasm | ${size.wasmRaw} | ${size.wasmGzip} |`);
  console.log(`| JS (glue, layer, entry points) | ${size.jsRaw} | ${size.jsGzip} |`);
  console.log(`| index.d.ts | ${size.types} | — |\n`);
  console.log(`## Cold start to the first decision (median of ${cold.samples}, ms)\n`);
  console.log("| runtime | edgelimit | baseline | baseline is |\n|---|---|---|---|");
  console.log(`| Node (process start → first decision) | ${fmt(cold.nodeEdgelimitMs)} | ${fmt(cold.nodeUpstashMs)} | @upstash/ratelimit + @upstash/redis, same steps |`);
  console.log(`| workerd (new Miniflare → first response) | ${fmt(cold.workerdEdgelimitMs)} | ${fmt(cold.workerdNoLimiterMs)} | a Worker without a limiter |\n`);
  console.log(`## Decisions per second through the bridge (${flow.inFlight} in flight, ${flow.seconds} s, best of ${flow.rounds} rounds)\n`);
  console.log("| algorithm | edgelimit /s | @upstash, no auto-pipelining /s | ratio | @upstash, auto-pipelining (default) /s | ratio | p50 / p99 ms: edgelimit · @upstash plain · @upstash pipelined |");
  console.log("|---|---|---|---|---|---|---|");
  const latency = (r) => `${fmt(r.p50Ms, 2)} / ${fmt(r.p99Ms, 2)}`;
  for (const { algorithm, edgelimit: a, upstashPlain: p, upstashPipelined: b } of flow.algorithms) {
    console.log(
      `| ${algorithm} | ${fmt(a.perSecond, 0)} | ${fmt(p.perSecond, 0)} | ${fmt(a.perSecond / p.perSecond, 2)} | ${fmt(b.perSecond, 0)} | ${fmt(a.perSecond / b.perSecond, 2)} | ${latency(a)} · ${latency(p)} · ${latency(b)} |`,
    );
  }
}

const stack = await connectOrStartStack(options);
try {
  const report = { package: packageSize(), coldStart: await coldStarts(stack), throughput: await decisionsPerSecond(stack) };
  if (options.json) process.stdout.write(`${JSON.stringify(report)}\n`);
  else printTables(report);
} finally {
  await stack.stop();
}
