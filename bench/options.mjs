// Shared by the Node drivers (bench/npm.mjs, worker.mjs, coalescing.mjs, reserved.mjs): their command line, their
// percentiles and measuring loops, a count of their HTTP requests, and the bridge they measure against. Import it
// before tests/js/harness.mjs: it sets which edgelimit binary the harness starts (the release build).
import { parseArgs } from "node:util";

process.env.EDGELIMIT_BIN ??= new URL("../target/release/edgelimit", import.meta.url).pathname;

/**
 * The drivers' flags: --json (one JSON object on stdout), --quick (tiny sizes), --url and --token (measure against
 * this bridge instead of starting a redis-server and bridge; `edgelimit-bench` passes its own).
 */
export function benchOptions() {
  const { values } = parseArgs({
    options: {
      json: { type: "boolean", default: false },
      quick: { type: "boolean", default: false },
      url: { type: "string" },
      token: { type: "string" },
    },
  });
  if (Boolean(values.url) !== Boolean(values.token)) {
    throw new Error("pass --url and --token together (a bridge to measure against), or neither (one is started)");
  }
  return values;
}

/** The sample at rank ⌊q·n⌋ of sorted samples (as `edgelimit-bench` takes its own). */
export const quantile = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];

/** The bridge given with --url/--token (left running), or a fresh redis-server and bridge, stopped by `stop()`. */
export async function connectOrStartStack(options) {
  if (options.url) return { url: options.url, token: options.token, stop: async () => {} };
  const { startStack } = await import("../tests/js/harness.mjs");
  return startStack();
}

/**
 * Counts every HTTP request this process makes from now on: edgelimit's wasm core and @upstash/redis both call the
 * global `fetch`. Returns a function that gives the count so far.
 */
export function countFetches() {
  let fetches = 0;
  const realFetch = globalThis.fetch;
  globalThis.fetch = (...args) => {
    fetches++;
    return realFetch(...args);
  };
  return () => fetches;
}

/**
 * `inFlight` loops calling `decide(identifier)` for `seconds` (100 identifiers a loop), every answer a grant:
 * requests, decisions per second and latency quantiles (ms).
 */
export async function closedLoop(inFlight, seconds, decide) {
  const latencies = [];
  const started = performance.now();
  const deadline = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: inFlight }, async (_, lane) => {
      for (let i = 0; performance.now() < deadline; i++) {
        const start = performance.now();
        const result = await decide(`lane-${lane}-${i % 100}`);
        if (!result.success) throw new Error(`a bench request was denied: ${JSON.stringify(result)}`);
        latencies.push(performance.now() - start);
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const [p50Ms, p99Ms] = [quantile(latencies, 0.5), quantile(latencies, 0.99)];
  return { requests: latencies.length, perSecond: latencies.length / elapsed, p50Ms, p99Ms };
}

/**
 * `rounds` rounds of `measure(name)` for each of `names`, who goes first rotating so that none always runs on a
 * warmer (or busier) machine: each one's fastest run, by name.
 */
export async function fastestOfRounds(names, rounds, measure) {
  const best = {};
  for (let round = 0; round < rounds; round++) {
    for (const who of names.map((_, i) => names[(i + round) % names.length])) {
      const result = await measure(who);
      if (!best[who] || result.perSecond > best[who].perSecond) best[who] = result;
    }
  }
  return best;
}
