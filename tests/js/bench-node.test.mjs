// The Node benchmark drivers, run tiny (--quick) against the harness's bridge: each prints one JSON object, of the
// shape `edgelimit-bench` reads (bench/src/node.rs). Shapes only: a timing asserted on a shared machine is a
// flaky test, and judging the numbers is the benchmark's business.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { promisify } from "node:util";
import { ROOT, startStack } from "./harness.mjs";

const run = promisify(execFile);

let stack;
before(async () => {
  stack = await startStack();
});
after(async () => {
  await stack?.stop();
});

/** `node <script> --json --quick` against the harness's bridge: the JSON it printed, and nothing else on stdout. */
async function report(script) {
  const args = [join(ROOT, script), "--json", "--quick", "--url", stack.url, "--token", stack.token];
  const { stdout } = await run(process.execPath, args, { cwd: ROOT, maxBuffer: 1 << 20 });
  return JSON.parse(stdout);
}

function positive(value, what) {
  assert.ok(Number.isFinite(value) && value > 0, `${what} should be a positive number, got ${value}`);
}

function runStats(stats, what) {
  assert.ok(Number.isInteger(stats.requests) && stats.requests > 0, `${what}: requests ${stats.requests}`);
  positive(stats.perSecond, `${what} perSecond`);
  positive(stats.p50Ms, `${what} p50Ms`);
  assert.ok(stats.p99Ms >= stats.p50Ms, `${what}: p99 ${stats.p99Ms} < p50 ${stats.p50Ms}`);
}

test("bench/npm.mjs --json: package size, cold starts, decisions/s against @upstash/ratelimit", async () => {
  const { package: size, coldStart, throughput } = await report("bench/npm.mjs");
  for (const part of ["wasmRaw", "wasmGzip", "jsRaw", "jsGzip", "types"]) positive(size[part], `package.${part}`);
  assert.equal(coldStart.samples, 1, "quick: one cold start each");
  for (const field of ["nodeEdgelimitMs", "nodeUpstashMs", "workerdEdgelimitMs", "workerdNoLimiterMs"]) {
    positive(coldStart[field], `coldStart.${field}`);
  }
  positive(throughput.inFlight, "inFlight");
  positive(throughput.seconds, "seconds");
  positive(throughput.rounds, "rounds");
  assert.deepEqual(
    throughput.algorithms.map((row) => row.algorithm),
    ["fixed window", "sliding window", "token bucket"],
  );
  for (const row of throughput.algorithms) {
    for (const who of ["edgelimit", "upstashPlain", "upstashPipelined"]) runStats(row[who], `${row.algorithm} ${who}`);
  }
});

test("bench/worker.mjs --json: latency added in workerd, cold start, bundle size", async () => {
  const { rounds, requests, workers } = await report("bench/worker.mjs");
  positive(rounds, "rounds");
  positive(requests, "requests");
  assert.deepEqual(
    workers.map((worker) => worker.name),
    ["no limiter", "edgelimit's wasm module, unused", "edgelimit", "@upstash/ratelimit"],
  );
  for (const [i, worker] of workers.entries()) {
    for (const field of ["p50Ms", "p99Ms", "coldStartMs", "bundleKib", "bundleGzipKib"]) {
      positive(worker[field], `${worker.name} ${field}`);
    }
    for (const field of ["addedP50Ms", "addedP99Ms"]) {
      // The baseline adds nothing to itself; the others add a difference, which noise may make negative.
      if (i === 0) assert.equal(worker[field], null, `${worker.name} ${field}`);
      else assert.ok(Number.isFinite(worker[field]), `${worker.name} ${field}: ${worker[field]}`);
    }
  }
});
