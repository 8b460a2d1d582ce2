// The Worker in local workerd (Miniflare), one bridge, Redis and origin: the same proxy with no limiter (baseline),
// with edgelimit's wasm module loaded and never called, with edgelimit (one sliding-window rule) and with
// @upstash/ratelimit. Per Worker: p50/p99 over the rounds and what that adds to the baseline's, cold start (median of
// COLD_STARTS launches, taking turns), bundle size from `wrangler deploy --dry-run`. Every request allowed.
// Run: edgelimit-bench (--json), or scripts/build-wasm && cargo build --release -p edgelimit-cli &&
//   node bench/worker.mjs [--quick] [--url U --token T]; ROUNDS, REQUESTS, COLD_STARTS override;
//   BASELINE_WORKER=DIR adds the Worker in DIR (index.js, wasm/: another commit's worker/) as "edgelimit (baseline)".
import { resolve } from "node:path";
import { benchOptions, connectOrStartStack, quantile } from "./options.mjs";

const { bundleWorker, startOrigin, startWorker, varsFor } = await import("../tests/js/worker-harness.mjs");

const options = benchOptions();
const ROUNDS = Number(process.env.ROUNDS ?? (options.quick ? 1 : 5));
const REQUESTS = Number(process.env.REQUESTS ?? (options.quick ? 20 : 200));
const WARM_UP = options.quick ? 5 : 20;
const COLD_STARTS = Number(process.env.COLD_STARTS ?? (options.quick ? 1 : 15));
const BASELINE = process.env.BASELINE_WORKER;

/** `Total Upload: 515.64 KiB / gzip: 160.82 KiB` from wrangler's report, as numbers. */
function bundleSize(report) {
  const match = report.match(/Total Upload: ([\d.]+) KiB \/ gzip: ([\d.]+) KiB/);
  if (!match) throw new Error(`wrangler reported no bundle size:\n${report}`);
  return { bundleKib: Number(match[1]), bundleGzipKib: Number(match[2]) };
}

/** Bundles each Worker, starts it `COLD_STARTS` times, taking turns (each timed until its first response; all but
 * the last launch disposed of), and warms the last one up. */
async function startWorkers(workers, stack, origin) {
  const rules = [{ name: "bench", limits: [{ algorithm: "slidingWindow", limit: 1_000_000_000, interval: "1 h" }] }];
  const vars = varsFor(stack, origin, rules);
  for (const worker of workers) {
    worker.bundle = bundleWorker(worker.entry);
    Object.assign(worker, bundleSize(worker.bundle.report));
  }
  // The very first workerd launch is slower (binary and libraries read from disk): keep it out of the cold starts.
  await (await startWorker(workers[0].bundle, vars)).dispose();
  for (let launch = 1; launch <= COLD_STARTS; launch += 1) {
    for (const worker of workers) {
      await worker.runtime?.dispose();
      const started = performance.now();
      const token = worker.admin ? { EDGELIMIT_TOKEN: stack.token } : {};
      worker.runtime = await startWorker(worker.bundle, { ...vars, ...token });
      await fetchOk(worker, "/warm");
      (worker.coldStarts ??= []).push(performance.now() - started);
    }
  }
  for (const worker of workers) {
    worker.coldStartMs = quantile([...worker.coldStarts].sort((a, b) => a - b), 0.5);
    // Warm up: isolate, script cache, connections.
    for (let i = 0; i < WARM_UP; i += 1) await fetchOk(worker, "/warm");
    worker.latencies = [];
  }
}

/** One request through `worker`; anything but 200 is an error. */
async function fetchOk(worker, path, init) {
  const response = await worker.runtime.fetch(path, init);
  const body = await response.text();
  if (response.status !== 200) throw new Error(`${worker.name}: HTTP ${response.status} for ${path}: ${body}`);
}

/** `ROUNDS` rounds of `REQUESTS` sequential requests per Worker, the Workers taking turns. */
async function measure(workers) {
  for (let round = 1; round <= ROUNDS; round += 1) {
    for (const worker of workers) {
      for (let i = 0; i < REQUESTS; i += 1) {
        const start = performance.now();
        await fetchOk(worker, "/page", { ip: `198.51.100.${i % 200}` });
        worker.latencies.push(performance.now() - start);
      }
    }
    process.stderr.write(`round ${round}/${ROUNDS} done\n`);
  }
  const [baseline] = workers;
  for (const worker of workers) {
    const sorted = [...worker.latencies].sort((a, b) => a - b);
    worker.p50Ms = quantile(sorted, 0.5);
    worker.p99Ms = quantile(sorted, 0.99);
  }
  return workers.map((worker) => ({
    name: worker.name,
    p50Ms: worker.p50Ms,
    p99Ms: worker.p99Ms,
    addedP50Ms: worker === baseline ? null : worker.p50Ms - baseline.p50Ms,
    addedP99Ms: worker === baseline ? null : worker.p99Ms - baseline.p99Ms,
    coldStartMs: worker.coldStartMs,
    bundleKib: worker.bundleKib,
    bundleGzipKib: worker.bundleGzipKib,
  }));
}

function printTable(report) {
  const ms = (value) => `${value.toFixed(2)} ms`;
  console.log(
    `\nWorker latency, local workerd, ${report.rounds} rounds × ${report.requests} sequential requests per Worker; ` +
      `cold start: median of ${report.coldStarts} launches\n`,
  );
  console.log("| Worker | p50 | p99 | added p50 | added p99 | cold start | bundle (wrangler, raw / gzip) |");
  console.log("|---|---|---|---|---|---|---|");
  for (const w of report.workers) {
    const added = (value) => (value === null ? "—" : ms(value));
    console.log(
      `| ${w.name} | ${ms(w.p50Ms)} | ${ms(w.p99Ms)} | ${added(w.addedP50Ms)} | ${added(w.addedP99Ms)} | ${w.coldStartMs.toFixed(0)} ms | ${w.bundleKib} KiB / ${w.bundleGzipKib} KiB |`,
    );
  }
}

const workers = [
  { name: "no limiter", entry: "bench/workers/no-limiter.js" },
  // The same proxy with edgelimit's wasm module compiled and instantiated, never called: the part of edgelimit's
  // cold start that is workerd loading a wasm module of this size.
  { name: "edgelimit's wasm module, unused", entry: "bench/workers/wasm-only.js" },
  // The bridge's fence knows this build's scripts only: a baseline Worker gets the admin token, and so, like for
  // like, does edgelimit when a baseline runs beside it.
  { name: "edgelimit", entry: undefined, admin: Boolean(BASELINE) },
  ...(BASELINE ? [{ name: "edgelimit (baseline)", entry: resolve(BASELINE, "index.js"), admin: true }] : []),
  // Its scripts are not edgelimit's, which a limiter token may not run (the bridge's fence): it gets the admin token.
  { name: "@upstash/ratelimit", entry: "bench/workers/upstash.js", admin: true },
];
const stack = await connectOrStartStack(options);
const origin = await startOrigin();
try {
  await startWorkers(workers, stack, origin);
  const report = { rounds: ROUNDS, requests: REQUESTS, coldStarts: COLD_STARTS, workers: await measure(workers) };
  if (options.json) process.stdout.write(`${JSON.stringify(report)}\n`);
  else printTable(report);
} finally {
  for (const worker of workers) {
    await worker.runtime?.dispose();
    worker.bundle?.remove();
  }
  origin.stop();
  await stack.stop();
}
