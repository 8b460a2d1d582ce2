// The Worker's added latency, in local workerd (Miniflare) against the same bridge, Redis and origin, in one run:
//   - the same proxy Worker with no limiter (the baseline), with edgelimit (the real bundle, one sliding-window rule),
//     and with @upstash/ratelimit (sliding window, its Cloudflare client);
//   - per request latency as the client sees it (median, p99), `REQUESTS` sequential requests per Worker per round,
//     the Workers taking turns round by round so that machine noise falls on all of them alike;
//   - added latency = a Worker's median (p99) minus the baseline's median (p99);
//   - each Worker's bundle as `wrangler deploy --dry-run` reports it.
// Limits are so high that every request is allowed. Not a test: read the differences, not the absolute numbers.
//
// Run: scripts/build-wasm && cargo build --release -p edgelimit-cli && node bench/worker.mjs   (ROUNDS, REQUESTS)
process.env.EDGELIMIT_BIN ??= new URL("../target/release/edgelimit", import.meta.url).pathname;
const { startStack } = await import("../tests/js/harness.mjs");
const { bundleWorker, startOrigin, startWorker, varsFor } = await import("../tests/js/worker-harness.mjs");

const ROUNDS = Number(process.env.ROUNDS ?? 5);
const REQUESTS = Number(process.env.REQUESTS ?? 200);
const quantile = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];

const stack = await startStack();
const origin = await startOrigin();
const rules = [{ name: "bench", limits: [{ algorithm: "slidingWindow", limit: 1_000_000_000, interval: "1 h" }] }];
const contenders = [
  { name: "no limiter", entry: "bench/workers/no-limiter.js" },
  { name: "edgelimit", entry: undefined },
  { name: "@upstash/ratelimit", entry: "bench/workers/upstash.js" },
];
for (const contender of contenders) {
  contender.bundle = bundleWorker(contender.entry);
  contender.size = contender.bundle.report.match(/Total Upload: ([\d.]+ KiB) \/ gzip: ([\d.]+ KiB)/).slice(1);
  contender.worker = await startWorker(contender.bundle, varsFor(stack, origin, rules));
  contender.latencies = [];
  // Warm up: isolate, script cache, connections.
  for (let i = 0; i < 20; i += 1) await (await contender.worker.fetch("/warm")).text();
}

for (let round = 1; round <= ROUNDS; round += 1) {
  for (const contender of contenders) {
    for (let i = 0; i < REQUESTS; i += 1) {
      const start = performance.now();
      const response = await contender.worker.fetch("/page", { ip: `198.51.100.${i % 200}` });
      await response.text();
      if (response.status !== 200) throw new Error(`${contender.name}: HTTP ${response.status}`);
      contender.latencies.push(performance.now() - start);
    }
  }
  process.stderr.write(`round ${round}/${ROUNDS} done\n`);
}

const [baseline] = contenders;
for (const contender of contenders) {
  const sorted = [...contender.latencies].sort((a, b) => a - b);
  contender.p50 = quantile(sorted, 0.5);
  contender.p99 = quantile(sorted, 0.99);
}
console.log(`\nWorker latency, local workerd, ${ROUNDS} rounds × ${REQUESTS} sequential requests per Worker\n`);
console.log("| Worker | p50 | p99 | added p50 | added p99 | bundle (wrangler, raw / gzip) |");
console.log("|---|---|---|---|---|---|");
for (const c of contenders) {
  const added = c === baseline ? "—" : `${(c.p50 - baseline.p50).toFixed(2)} ms`;
  const addedP99 = c === baseline ? "—" : `${(c.p99 - baseline.p99).toFixed(2)} ms`;
  console.log(`| ${c.name} | ${c.p50.toFixed(2)} ms | ${c.p99.toFixed(2)} ms | ${added} | ${addedP99} | ${c.size[0]} / ${c.size[1]} |`);
}

for (const contender of contenders) {
  await contender.worker.dispose();
  contender.bundle.remove();
}
origin.stop();
await stack.stop();
