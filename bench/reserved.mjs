// Reserved permits (docs/reserved.md) behind a relay adding DELAY_MS each way: CLIENTS clients on one hot identifier,
// 50 requests a second each, open loop, against 100 per second; edgelimit with and without reserve next to
// @upstash/ratelimit's nearest algorithm. Per contender: HTTP requests per decision, latency, and grants over EXACT's
// (an exact limiter with no round trip); failure-policy grants counted apart. tests/tests/reserved.rs proves safety.
// Run: scripts/bench (appends its table to bench/RESULTS.md), or scripts/build-wasm && cargo build --release -p
//   edgelimit-cli && node bench/reserved.mjs [--quick]; SECONDS (60; 3 with --quick), DELAY_MS (10), CLIENTS ("4,32"),
//   ALGORITHMS (all), TIMELINE_MS (grants per bin of that many ms) in the environment override.
import { createServer, connect } from "node:net";
import { benchOptions, connectOrStartStack, countFetches, quantile } from "./options.mjs";

const { Ratelimit } = await import("edgelimit");
const upstash = await import("@upstash/ratelimit");
const { Redis } = await import("@upstash/redis");

const options = benchOptions();
const SECONDS = Number(process.env.SECONDS ?? (options.quick ? 3 : 60));
const DELAY_MS = Number(process.env.DELAY_MS ?? 10);
const CLIENTS = (process.env.CLIENTS ?? "4,32").split(",").map(Number);
const ALGORITHMS = process.env.ALGORITHMS?.split(",");
// How a limit's permits cycle (docs/design/reserve.md, "Why the sliding log leaves the most unused").
const TIMELINE_MS = Number(process.env.TIMELINE_MS ?? 0);
const PER_CLIENT_PER_SECOND = 50;
const [LIMIT, BURST] = [100, 100];
// The second limit of the two-limit contenders: a sliding log the run never fills (10 000 a minute).
const [MINUTE_LIMIT, MINUTE_MS] = [10000, 60000];
// What each algorithm's limit can grant this run's requests: an exact limiter with no round trip deciding each at the
// moment it was asked, in order. One capacity for every contender of the algorithm, however their answers are timed
// (a bound over the run's length would move by a whole window with when the last answer came); a fixed window's
// contenders can pass 1.00 a little, as the delay moves requests into the next window. `{fits(t), take(t)}`.
const EXACT = {
  // GCRA, burst BURST: a request at t fits when max(TAT, t) + T − t ≤ BURST × T, T = 1 s / LIMIT.
  gcra() {
    const period = 1000 / LIMIT;
    let theoretical = -Infinity;
    return {
      fits: (t) => Math.max(theoretical, t) + period - t <= BURST * period,
      take: (t) => (theoretical = Math.max(theoretical, t) + period),
    };
  },
  fixedWindow() {
    const counts = new Map();
    const window = (t) => Math.floor(t / 1000);
    return {
      fits: (t) => (counts.get(window(t)) ?? 0) < LIMIT,
      take: (t) => counts.set(window(t), (counts.get(window(t)) ?? 0) + 1),
    };
  },
  // At most `limit` grants in any span of `interval` ms: a request at t fits when fewer were granted in
  // (t − interval, t].
  slidingLog(limit = LIMIT, interval = 1000) {
    const grants = [];
    let first = 0;
    return {
      fits(t) {
        while (first < grants.length && grants[first] <= t - interval) first++;
        return grants.length - first < limit;
      },
      take: (t) => grants.push(t),
    };
  },
  // The contenders' `twoLimits`: granted when both have room, and then taken from both.
  gcraAndSlidingLog() {
    const limits = [EXACT.gcra(), EXACT.slidingLog(MINUTE_LIMIT, MINUTE_MS)];
    return {
      fits: (t) => limits.every((limit) => limit.fits(t)),
      take: (t) => limits.forEach((limit) => limit.take(t)),
    };
  },
};
/** Grants asked at `times` (ms from the start), counted in bins of TIMELINE_MS: a line per second. */
function timeline(times) {
  const bins = new Array(Math.ceil((SECONDS * 1000) / TIMELINE_MS)).fill(0);
  for (const t of times) bins[Math.min(Math.floor(t / TIMELINE_MS), bins.length - 1)]++;
  const perLine = Math.max(1, Math.round(1000 / TIMELINE_MS));
  const lines = [];
  for (let i = 0; i < bins.length; i += perLine) lines.push(bins.slice(i, i + perLine).join(" "));
  return lines;
}

/** How many of the requests asked at `times` (unix ms) an exact `algorithm` limiter with no round trip grants. */
function exactGrants(algorithm, times) {
  const exact = EXACT[algorithm]();
  let granted = 0;
  for (const t of [...times].sort((a, b) => a - b)) {
    if (exact.fits(t)) {
      exact.take(t);
      granted++;
    }
  }
  return granted;
}
const fmt = (n, digits = 1) => n.toFixed(digits);

// Every HTTP request either library makes goes through the global fetch: count them.
const fetches = countFetches();

/** A TCP relay to `url` that holds every chunk `DELAY_MS` in each direction; its URL and `close`. */
async function delayingRelay(url) {
  const upstream = new URL(url);
  const delayed = (from, to) =>
    from.on("data", (chunk) => setTimeout(() => to.destroyed || to.write(chunk), DELAY_MS));
  const sockets = new Set();
  const server = createServer((client) => {
    const bridge = connect(Number(upstream.port), upstream.hostname);
    for (const socket of [client, bridge]) {
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
      socket.on("error", () => {
        client.destroy();
        bridge.destroy();
      });
    }
    delayed(client, bridge);
    delayed(bridge, client);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    close() {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}

/**
 * `clients` clients made by `make`, each calling `limit(id)` 50 times a second, open loop, for SECONDS, against one
 * `algorithm` limit (a key of EXACT).
 */
async function run(make, algorithm, clients, id) {
  const limiters = Array.from({ length: clients }, make);
  const latencies = [];
  // When each request was asked, unix ms: what an exact limiter would have decided it at.
  const askedAt = [];
  // When each granted request was asked, ms from the run's start (for TIMELINE_MS).
  const grantedAt = [];
  let [granted, failed] = [0, 0];
  const pending = [];
  const fetchesBefore = fetches();
  const started = performance.now();
  await Promise.all(
    limiters.map(async (limiter, client) => {
      // Each client's requests are evenly spaced, the clients' staggered across the first period.
      const period = 1000 / PER_CLIENT_PER_SECOND;
      let next = started + (period * client) / clients;
      while (next < started + SECONDS * 1000) {
        const wait = next - performance.now();
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
        const asked = performance.now();
        askedAt.push(performance.timeOrigin + asked);
        pending.push(
          limiter.limit(id).then((result) => {
            latencies.push(performance.now() - asked);
            // A grant the failure policy made (the store timed out or failed) is no decision: counted apart.
            if (result.reason === "timeout" || result.reason === "error") failed++;
            else if (result.success) {
              granted++;
              grantedAt.push(asked - started);
            }
          }),
        );
        next += period;
      }
    }),
  );
  await Promise.all(pending);
  // The decisions' span: from the first request to the last answer (requests asked before SECONDS are answered
  // after it).
  const seconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const exact = exactGrants(algorithm, askedAt);
  return {
    decisions: latencies.length,
    granted,
    failed,
    exact,
    capacityUsed: granted / exact,
    requestsPerDecision: (fetches() - fetchesBefore) / latencies.length,
    p50Ms: quantile(latencies, 0.5),
    p99Ms: quantile(latencies, 0.99),
    seconds,
    timeline: TIMELINE_MS ? timeline(grantedAt) : undefined,
  };
}

const stack = await connectOrStartStack(options);
const relay = await delayingRelay(stack.url);
try {
  const ours = (limiter, reserve) => () =>
    new Ratelimit({
      url: relay.url, token: stack.token, limiter, prefix: "reserve-bench", cache: false,
      ...(reserve ? { reserve } : {}), timeout: 5000,
    });
  const redis = new Redis({ url: relay.url, token: stack.token, enableTelemetry: false });
  const peer = (limiter) => () =>
    new upstash.Ratelimit({ redis, limiter, prefix: "reserve-bench-upstash", ephemeralCache: false });
  const reserve = "500 ms";
  const twoLimits = [Ratelimit.gcra(LIMIT, "1 s", BURST), Ratelimit.slidingLog(MINUTE_LIMIT, `${MINUTE_MS} ms`)];
  // [algorithm, contender, make]
  const contenders = [
    ["gcra", `edgelimit, reserve: "${reserve}"`, ours(Ratelimit.gcra(LIMIT, "1 s", BURST), reserve)],
    ["gcra", "edgelimit, no reserve", ours(Ratelimit.gcra(LIMIT, "1 s", BURST), null)],
    ["gcra", "@upstash/ratelimit (token bucket)", peer(upstash.Ratelimit.tokenBucket(LIMIT, "1 s", BURST))],
    ["fixedWindow", `edgelimit, reserve: "${reserve}"`, ours(Ratelimit.fixedWindow(LIMIT, "1 s"), reserve)],
    ["fixedWindow", "@upstash/ratelimit", peer(upstash.Ratelimit.fixedWindow(LIMIT, "1 s"))],
    ["slidingLog", `edgelimit, reserve: "${reserve}"`, ours(Ratelimit.slidingLog(LIMIT, "1 s"), reserve)],
    // A log's used permits free when Redis learns of them: shorter blocks trade round trips for capacity.
    ["slidingLog", 'edgelimit, reserve: "100 ms"', ours(Ratelimit.slidingLog(LIMIT, "1 s"), "100 ms")],
    ["slidingLog", "@upstash/ratelimit (sliding window)", peer(upstash.Ratelimit.slidingWindow(LIMIT, "1 s"))],
    ["gcraAndSlidingLog", `edgelimit, reserve: "${reserve}"`, ours(twoLimits, reserve)],
    ["gcraAndSlidingLog", "edgelimit, no reserve", ours(twoLimits, null)],
  ];
  const rows = [];
  let round = 0;
  for (const clients of CLIENTS) {
    for (const [algorithm, who, make] of contenders.filter(([algorithm]) => ALGORITHMS?.includes(algorithm) ?? true)) {
      rows.push({ clients, algorithm, who, ...(await run(make, algorithm, clients, `hot-${round++}`)) });
    }
  }
  if (options.json) {
    process.stdout.write(`${JSON.stringify({ seconds: SECONDS, delayMs: DELAY_MS, rows })}\n`);
  } else {
    console.log(
      `One identifier, a limit of ${LIMIT} per second (GCRA: burst ${BURST}); each client ${PER_CLIENT_PER_SECOND} ` +
        `requests a second, open loop, for ${SECONDS} s; a relay adds ${DELAY_MS} ms each way (a round trip of ` +
        `${2 * DELAY_MS} ms more). Exact: what an exact limiter of the algorithm with no round trip grants the ` +
        `same requests, each decided when it was asked (the limit's capacity for them). Capacity used: granted / ` +
        `exact.\n`,
    );
    console.log("| clients | algorithm | contender | decisions | granted | exact | capacity used | failed (timeout, error) | HTTP requests per decision | p50 ms | p99 ms |");
    console.log("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (const r of rows) {
      console.log(
        `| ${r.clients} | ${r.algorithm} | ${r.who} | ${r.decisions} | ${r.granted} | ${r.exact} | ` +
          `${fmt(r.capacityUsed, 3)} | ${r.failed} | ${fmt(r.requestsPerDecision, 3)} | ${fmt(r.p50Ms, 2)} | ` +
          `${fmt(r.p99Ms, 2)} |`,
      );
    }
    for (const r of rows.filter((r) => r.timeline)) {
      console.log(`\nGrants per ${TIMELINE_MS} ms, a line per second: ${r.clients} clients, ${r.algorithm}, ${r.who}`);
      console.log(r.timeline.join("\n"));
    }
  }
} finally {
  relay.close();
  await stack.stop();
}
