// Redis CPU instructions per decision (redis-server under callgrind; unlike µs, counts ignore the machine's load), per
// algorithm: edgelimit's npm package, @upstash/ratelimit and Redisson's script as their libraries run them, 100
// granted then 100 denied on one identifier, each phase counted apart; floors: INCR in a script, and TIME then INCR.
// Goal: at most the cheapest peer's count plus one TIME. Then the same decisions 10 at once.
// Run: scripts/build-wasm && cargo build --release -p edgelimit-cli && node bench/instructions.mjs [--json]
//   [--keep DIR: each phase's callgrind dump, for `callgrind_annotate --inclusive=yes`]. Needs valgrind.
import { spawn, execFile } from "node:child_process";
import { once } from "node:events";
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs, promisify } from "node:util";

process.env.EDGELIMIT_BIN ??= new URL("../target/release/edgelimit", import.meta.url).pathname;
const { ROOT, freePort, ping, startBridge, TOKEN, upstashRedis, waitFor } = await import("../tests/js/harness.mjs");
const { Ratelimit } = await import("edgelimit");
const upstash = await import("@upstash/ratelimit");

const run = promisify(execFile);
const { values: options } = parseArgs({
  options: { json: { type: "boolean", default: false }, keep: { type: "string" } },
});
const LIMIT = 100;
const WINDOW = "1 h";

/** redis-server under callgrind on a free port, counters zeroed and dumped on demand. */
async function startCountedRedis() {
  const dir = mkdtempSync(join(tmpdir(), "edgelimit-callgrind-"));
  const port = await freePort();
  const child = spawn(
    "valgrind",
    ["--tool=callgrind", `--callgrind-out-file=${join(dir, "callgrind.out")}`, "redis-server", "--port", String(port),
      "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir,
      // Redis's timer work (serverCron) runs hz times a second whatever the load: counted with the decisions, it
      // grows with the wall time a phase takes, which a loaded machine stretches. Once a second keeps it small.
      "--hz", "1"],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  child.on("error", (e) => console.error(`valgrind failed to start (${e.message}); run scripts/setup`));
  // Redis under valgrind takes seconds to start.
  await waitFor(`redis-server under valgrind on port ${port}`, () => ping(port), 60_000);
  const bridge = await startBridge(`redis://127.0.0.1:${port}`);
  bridge.redis = upstashRedis({ url: bridge.url, token: TOKEN }, { enableAutoPipelining: false });
  bridge.pipelined = upstashRedis({ url: bridge.url, token: TOKEN }, { enableAutoPipelining: true });
  const pid = child.pid;
  let dumps = 0;
  return {
    bridge,
    /** Instructions Redis executes while `work` runs; its dump is kept as `<keep>/<name>.out` with --keep. */
    async count(work, name) {
      await run("callgrind_control", ["--zero", String(pid)]);
      await work();
      await run("callgrind_control", ["--dump", String(pid)]);
      dumps += 1;
      const file = readdirSync(dir).find((name) => name.endsWith(`.${dumps}`));
      const totals = readFileSync(join(dir, file), "utf8").match(/^(?:totals|summary): (\d+)/m);
      if (!totals) throw new Error(`callgrind dump ${file} has no totals line`);
      if (options.keep) {
        mkdirSync(options.keep, { recursive: true });
        copyFileSync(join(dir, file), join(options.keep, `${name.replace(/[^\w-]+/g, "-")}.out`));
      }
      return Number(totals[1]);
    },
    async stop() {
      await bridge.stop();
      child.kill("SIGTERM");
      await once(child, "exit");
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Decisions made this many at once, in the second table. */
const AT_ONCE = 10;

/**
 * Each contender: an algorithm, who runs it, `decide(identifier)` resolving to whether it was granted (with
 * `decide.prepare(identifier)`, when there is one, run before the counts), and how many decisions are made at once.
 */
function contenders(bridge) {
  const config = { url: bridge.url, token: TOKEN, cache: false, timeout: 30_000 };
  const edgelimit = (limiter, prefix) => {
    const ratelimit = new Ratelimit({ ...config, limiter, prefix });
    return async (identifier) => (await ratelimit.limit(identifier)).success;
  };
  const peer = (limiter, prefix, redis = bridge.redis) => {
    const ratelimit = new upstash.Ratelimit({ redis, limiter, prefix, ephemeralCache: false });
    return async (identifier) => (await ratelimit.limit(identifier)).success;
  };
  const redissonScript = readFileSync(join(ROOT, "bench/peers/redisson_acquire.lua"), "utf8");
  let request = 0;
  const redisson = async (identifier) => {
    const name = `redisson-${identifier}`;
    const keys = [name, `{${name}}:value`, `{${name}}:value:java`, `{${name}}:permits`, `{${name}}:permits:java`];
    request += 1;
    return (await bridge.redis.eval(redissonScript, keys, ["1", String(Date.now()), `r${request}`])) === null;
  };
  // Redisson's limiter exists once its rate is set (trySetRate), before any tryAcquire.
  redisson.prepare = (identifier) =>
    bridge.redis.hset(`redisson-${identifier}`, { rate: LIMIT, interval: 3_600_000, type: 0 });
  // [algorithm, key prefix, edgelimit's limiter, @upstash/ratelimit's if it has the algorithm]
  const algorithms = [
    ["token bucket", "tb", () => Ratelimit.tokenBucket(LIMIT, WINDOW, LIMIT), () => upstash.Ratelimit.tokenBucket(LIMIT, WINDOW, LIMIT)],
    ["fixed window", "fw", () => Ratelimit.fixedWindow(LIMIT, WINDOW), () => upstash.Ratelimit.fixedWindow(LIMIT, WINDOW)],
    ["sliding window", "sw", () => Ratelimit.slidingWindow(LIMIT, WINDOW), () => upstash.Ratelimit.slidingWindow(LIMIT, WINDOW)],
    ["sliding log", "sl", () => Ratelimit.slidingLog(LIMIT, WINDOW)],
    ["GCRA", "gcra", () => Ratelimit.gcra(LIMIT, WINDOW)],
  ];
  // One at a time (Redisson beside the sliding log), then AT_ONCE at a time (@upstash/ratelimit auto-pipelined).
  return [1, AT_ONCE].flatMap((atOnce) =>
    algorithms.flatMap(([algorithm, prefix, ours, theirs]) => {
      const suffix = atOnce === 1 ? "" : String(atOnce);
      const rows = [[algorithm, "edgelimit", edgelimit(ours(), prefix + suffix), atOnce]];
      const redis = atOnce === 1 ? bridge.redis : bridge.pipelined;
      if (theirs) rows.push([algorithm, "@upstash/ratelimit", peer(theirs(), `u${prefix}${suffix}`, redis), atOnce]);
      else if (prefix === "sl" && atOnce === 1) rows.push([algorithm, "Redisson", redisson, 1]);
      return rows;
    }),
  );
}

/**
 * `decide` called `times` times on `identifier`, `atOnce` at a time (in a row when 1); throws unless every one
 * answered `expected`.
 */
async function phase(decide, identifier, times, expected, atOnce) {
  for (let i = 0; i < times; i += atOnce) {
    const granted = await Promise.all(Array.from({ length: atOnce }, () => decide(identifier)));
    if (granted.some((answer) => answer !== expected)) {
      throw new Error(`requests ${i + 1}-${i + atOnce} of a phase expecting ${expected ? "grants" : "denials"} got the other`);
    }
  }
}

const redis = await startCountedRedis();
const rows = [];
try {
  const { bridge } = redis;
  // The floors: a script calling INCR, as cheap as a limiter script can be, and the same with the TIME call that
  // edgelimit makes and the peers don't; their difference is the allowance of the cost goal.
  const floor = async (body) => {
    const sha = await bridge.redis.scriptLoad(body);
    const calls = async () => {
      for (let i = 0; i < LIMIT; i++) await bridge.redis.evalsha(sha, ["floor"], []);
    };
    return (await redis.count(calls, `floor-${body}`)) / LIMIT;
  };
  const incr = await floor("return redis.call('INCR', KEYS[1])");
  const time = await floor("redis.call('TIME') return redis.call('INCR', KEYS[1])");
  for (const [algorithm, who, decide, atOnce] of contenders(bridge)) {
    const identifier = `id-${Date.now()}`;
    for (const id of ["warm-up", identifier]) await decide.prepare?.(id);
    // Loads the script (EVALSHA, NOSCRIPT, EVAL) outside the counts; at once, the one that decides several too.
    await phase(decide, "warm-up", atOnce, true, atOnce);
    const name = `${algorithm}-${who}-${atOnce}`;
    const granted = await redis.count(() => phase(decide, identifier, LIMIT, true, atOnce), `${name}-granted`);
    const denied = await redis.count(() => phase(decide, identifier, LIMIT, false, atOnce), `${name}-denied`);
    rows.push({ algorithm, who, atOnce, granted: granted / LIMIT, denied: denied / LIMIT });
  }
  const report = { limit: LIMIT, window: WINDOW, floor: { incrScript: incr, timeScript: time }, rows };
  if (options.json) {
    console.log(JSON.stringify(report));
  } else {
    const k = (n) => `${(n / 1000).toFixed(1)}K`;
    console.log(`Redis instructions per decision (limit ${LIMIT} per ${WINDOW}; ${LIMIT} granted, then ${LIMIT} denied)`);
    console.log(`floor: a script calling INCR ${k(incr)}; TIME, then INCR ${k(time)}\n`);
    const extra = time - incr; // what one TIME call adds
    const peerOf = (row) =>
      rows.find((other) => other.algorithm === row.algorithm && other.atOnce === row.atOnce && other.who !== "edgelimit");
    for (const atOnce of [1, AT_ONCE]) {
      console.log(atOnce === 1 ? "One decision at a time:\n" : `\n${AT_ONCE} decisions at once (edgelimit: one script call; @upstash/ratelimit: auto-pipelined, a call each):\n`);
      console.log("| algorithm | contender | granted | denied | vs peer + TIME (granted / denied) |");
      console.log("|---|---|---:|---:|---:|");
      for (const row of rows.filter((row) => row.atOnce === atOnce)) {
        const peer = peerOf(row);
        const ratio = peer && row.who === "edgelimit"
          ? `${(row.granted / (peer.granted + extra)).toFixed(2)} / ${(row.denied / (peer.denied + extra)).toFixed(2)}`
          : "";
        console.log(`| ${row.algorithm} | ${row.who} | ${k(row.granted)} | ${k(row.denied)} | ${ratio} |`);
      }
    }
    // The cost goal, per algorithm that has a peer, one decision at a time: granted and denied each at most the
    // peer's + one TIME.
    const verdicts = rows.filter((row) => row.who === "edgelimit" && row.atOnce === 1).flatMap((row) => {
      const peer = peerOf(row);
      if (!peer) return [];
      const met = row.granted <= peer.granted + extra && row.denied <= peer.denied + extra;
      return [`${row.algorithm} ${met ? "met" : "not met"}`];
    });
    console.log(`\ngoal (at most the peer's + one TIME, granted and denied): ${verdicts.join("; ")}`);
  }
} finally {
  await redis.stop();
}
