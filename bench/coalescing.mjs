// Coalescing (src/rest/coalesce.rs) from Node: edgelimit with and without it next to @upstash/ratelimit with and
// without auto-pipelining, 1, 8 and 64 decisions in flight on one bridge, every request allowed, caches off:
// decisions/s, latency, HTTP requests (every fetch counted) and Redis script µs per decision. Read the ratios.
// Run: scripts/build-wasm && cargo build --release -p edgelimit-cli && node bench/coalescing.mjs [--quick]
//   (scripts/bench appends its table to bench/RESULTS.md); ROUNDS, SECONDS in the environment override the sizes.
import { benchOptions, closedLoop, connectOrStartStack, countFetches, fastestOfRounds } from "./options.mjs";

const { Ratelimit } = await import("edgelimit");
const upstash = await import("@upstash/ratelimit");
const { Redis } = await import("@upstash/redis");

const options = benchOptions();
const ROUNDS = Number(process.env.ROUNDS ?? (options.quick ? 1 : 3));
const SECONDS = Number(process.env.SECONDS ?? (options.quick ? 0.3 : 2));
const IN_FLIGHT = [1, 8, 64];
const fmt = (n, digits = 1) => n.toFixed(digits);

// Every HTTP request either library makes goes through the global fetch: count them.
const fetches = countFetches();

/** Microseconds Redis has spent in scripts (EVALSHA and EVAL) so far. */
async function scriptMicros(admin) {
  const info = await admin.exec(["INFO", "commandstats"]);
  let usec = 0;
  for (const match of info.matchAll(/^cmdstat_(evalsha|eval):.*?usec=(\d+)/gm)) usec += Number(match[2]);
  return usec;
}

/** `inFlight` loops calling `decide` for SECONDS: decisions/s, latency, HTTP requests and script µs per decision. */
async function run(decide, inFlight, admin) {
  const [fetchesBefore, usecBefore] = [fetches(), await scriptMicros(admin)];
  const { requests: decisions, ...stats } = await closedLoop(inFlight, SECONDS, decide);
  const requests = fetches() - fetchesBefore;
  const usec = (await scriptMicros(admin)) - usecBefore;
  return { ...stats, requestsPerDecision: requests / decisions, redisMicrosPerDecision: usec / decisions };
}

const stack = await connectOrStartStack(options);
try {
  const admin = new Redis({ url: stack.url, token: stack.token, enableTelemetry: false, enableAutoPipelining: false });
  const limiter = () => Ratelimit.fixedWindow(1e8, "1 h");
  const theirs = () => upstash.Ratelimit.fixedWindow(1e8, "1 h");
  const ours = (coalesce) =>
    new Ratelimit({ url: stack.url, token: stack.token, limiter: limiter(), prefix: "coalesce", cache: false, coalesce });
  const peer = (enableAutoPipelining) =>
    new upstash.Ratelimit({
      redis: new Redis({ url: stack.url, token: stack.token, enableTelemetry: false, enableAutoPipelining }),
      limiter: theirs(),
      prefix: "coalesce-upstash",
      ephemeralCache: false,
    });
  const contenders = {
    "edgelimit, coalescing": ours(true),
    "edgelimit, coalesce: false": ours(false),
    "@upstash/ratelimit, auto-pipelining": peer(true),
    "@upstash/ratelimit, no auto-pipelining": peer(false),
  };
  const rows = [];
  for (const inFlight of IN_FLIGHT) {
    const best = await fastestOfRounds(Object.keys(contenders), ROUNDS, (who) =>
      run((id) => contenders[who].limit(id), inFlight, admin),
    );
    rows.push({ inFlight, best });
  }
  if (options.json) {
    process.stdout.write(`${JSON.stringify({ seconds: SECONDS, rounds: ROUNDS, rows })}\n`);
  } else {
    console.log(
      `Decisions through one bridge from one Node process (fixed window, every request allowed; ${SECONDS} s per ` +
        `run, best of ${ROUNDS} rounds, contenders taking turns). Ratios: to @upstash/ratelimit with auto-pipelining.\n`,
    );
    console.log("| in flight | contender | decisions/s | ratio | p50 ms | p99 ms | HTTP requests per decision | Redis script µs per decision |");
    console.log("|---:|---|---:|---:|---:|---:|---:|---:|");
    for (const { inFlight, best } of rows) {
      const baseline = best["@upstash/ratelimit, auto-pipelining"].perSecond;
      for (const [who, r] of Object.entries(best)) {
        console.log(
          `| ${inFlight} | ${who} | ${fmt(r.perSecond, 0)} | ${fmt(r.perSecond / baseline, 2)}× | ${fmt(r.p50Ms, 2)} | ` +
            `${fmt(r.p99Ms, 2)} | ${fmt(r.requestsPerDecision, 3)} | ${fmt(r.redisMicrosPerDecision, 2)} |`,
        );
      }
    }
  }
} finally {
  await stack.stop();
}
