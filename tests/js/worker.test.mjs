// The Worker end to end: the bundle `wrangler deploy` would upload, in real workerd, deciding through the real
// bridge and redis-server, in front of a real local origin.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { startStack, startStalledEndpoint } from "./harness.mjs";
import { bundleWorker, startOrigin, startWorker, varsFor } from "./worker-harness.mjs";

const FIVE_PER_10S = [{ algorithm: "slidingLog", limit: 5, interval: "10 s" }];

let stack;
let origin;
let bundle;
const workers = [];
let ruleNumber = 0;

before(async () => {
  stack = await startStack();
  origin = await startOrigin();
  bundle = bundleWorker();
});
after(async () => {
  await Promise.all(workers.map((worker) => worker.dispose()));
  origin?.stop();
  bundle?.remove();
  await stack?.stop();
});

/** A Worker with these rules; each test's rules get names of their own, so no test sees another's counts. */
async function worker(rules, extra) {
  const started = await startWorker(bundle, varsFor(stack, origin, rules, extra));
  workers.push(started);
  return started;
}

function uniqueName(base) {
  ruleNumber += 1;
  return `${base}-${ruleNumber}-${Date.now()}`;
}

async function redis(...command) {
  const response = await fetch(stack.url, {
    method: "POST",
    headers: { authorization: `Bearer ${stack.token}` },
    body: JSON.stringify(command),
  });
  return (await response.json()).result;
}

test("5 per 10 s per IP: five reach the origin, the sixth gets 429 with Retry-After and RateLimit fields, another IP is unaffected", async () => {
  const name = uniqueName("site");
  const site = await worker([{ name, key: "ip", limits: FIVE_PER_10S }]);
  const hitsBefore = origin.hits.length;
  for (let i = 1; i <= 5; i += 1) {
    const response = await site.fetch("/page", { ip: "198.51.100.1" });
    assert.equal(response.status, 200);
    assert.equal(response.headers.get("x-origin"), "yes");
    assert.equal(response.headers.get("ratelimit-policy"), `"${name}/sliding_log-10000ms";q=5;w=10`);
    assert.match(response.headers.get("ratelimit"), new RegExp(`^"${name}/sliding_log-10000ms";r=${5 - i};t=(9|10)$`));
    await response.text();
  }
  assert.equal(origin.hits.length - hitsBefore, 5);

  const denied = await site.fetch("/page", { ip: "198.51.100.1" });
  assert.equal(denied.status, 429);
  const retryAfter = Number(denied.headers.get("retry-after"));
  assert.ok(retryAfter >= 9 && retryAfter <= 10, `Retry-After ${retryAfter}`);
  assert.equal(denied.headers.get("ratelimit-policy"), `"${name}/sliding_log-10000ms";q=5;w=10`);
  assert.equal(denied.headers.get("ratelimit"), `"${name}/sliding_log-10000ms";r=0;t=${retryAfter}`);
  assert.equal(denied.headers.get("content-type"), "application/problem+json");
  const problem = await denied.json();
  assert.equal(problem.status, 429);
  assert.equal(problem.title, "Too Many Requests");
  assert.equal(problem.detail, `rule "${name}" allows 5 per 10 s; this ip has no room left; retry in ${retryAfter} s`);
  assert.ok(problem.retryAfterMs > 8_000 && problem.retryAfterMs <= 10_000);
  assert.equal(origin.hits.length - hitsBefore, 5, "the refused request never reached the origin");

  const other = await site.fetch("/page", { ip: "198.51.100.2" });
  assert.equal(other.status, 200);
  assert.match(other.headers.get("ratelimit"), /;r=4;/);
  await other.text();
});

test("keys: an API-key header and a cookie count separately per value; without one the IP counts", async () => {
  const api = uniqueName("api");
  const session = uniqueName("session");
  const oneEach = [{ algorithm: "fixedWindow", limit: 1, interval: "1 m" }];
  const site = await worker([
    { name: api, match: { path: "/api/" }, key: "header:X-API-Key", limits: oneEach },
    { name: session, key: "cookie:session", limits: oneEach },
  ]);
  const status = async (path, options) => (await site.fetch(path, options)).status;
  assert.equal(await status("/api/a", { headers: { "x-api-key": "key-1" } }), 200);
  assert.equal(await status("/api/a", { headers: { "x-api-key": "key-1" }, ip: "192.0.2.99" }), 429, "same key, other IP");
  assert.equal(await status("/api/a", { headers: { "x-api-key": "key-2" } }), 200);
  assert.equal(await status("/api/a", { ip: "192.0.2.50" }), 200, "no key: counted by IP");
  assert.equal(await status("/api/a", { ip: "192.0.2.50" }), 429);
  assert.equal(await status("/home", { headers: { cookie: "theme=dark; session=s1" } }), 200);
  assert.equal(await status("/home", { headers: { cookie: "session=s1" }, ip: "192.0.2.77" }), 429);
  assert.equal(await status("/home", { headers: { cookie: "session=s2" } }), 200);
  // API keys and sessions are hashed before they become Redis keys.
  const keys = await redis("KEYS", `edgelimit:{${api}/*`);
  assert.equal(keys.length, 3);
  assert.ok(keys.every((key) => !key.includes("key-1") && !key.includes("key-2")), keys.join(" "));
});

test("IPv6 clients are counted by their /64", async () => {
  const site = await worker([{ name: uniqueName("v6"), limits: [{ algorithm: "fixedWindow", limit: 2, interval: "1 m" }] }]);
  const status = async (ip) => (await site.fetch("/", { ip })).status;
  assert.equal(await status("2001:db8:1:2::1"), 200);
  assert.equal(await status("2001:db8:1:2:ffff::9"), 200);
  assert.equal(await status("2001:db8:1:2:abcd::7"), 429, "a third address in the same /64");
  assert.equal(await status("2001:db8:1:3::1"), 200, "the next /64");
});

test("key ip/48 counts an IPv6 client by its /48: another /64 of it is no fresh limit", async () => {
  const site = await worker([{ name: uniqueName("v6-48"), key: "ip/48", limits: [{ algorithm: "fixedWindow", limit: 2, interval: "1 m" }] }]);
  const status = async (ip) => (await site.fetch("/", { ip })).status;
  assert.equal(await status("2001:db8:7:1::1"), 200);
  assert.equal(await status("2001:db8:7:2::1"), 200);
  assert.equal(await status("2001:db8:7:ffff::1"), 429, "a third /64 in the same /48");
  assert.equal(await status("2001:db8:8::1"), 200, "the next /48");
});

test("several limits in one rule: one round trip, both advertised, the tighter one refuses", async () => {
  const name = uniqueName("pair");
  const site = await worker([
    {
      name,
      limits: [
        { algorithm: "slidingLog", limit: 3, interval: "10 s" },
        { algorithm: "tokenBucket", limit: 10, interval: "1 m", rate: 10, name: `${name}-hourly` },
      ],
    },
  ]);
  // The first decision loads the script (NOSCRIPT, then EVAL); count from a warm cache.
  await (await site.fetch("/", { ip: "203.0.113.41" })).text();
  const evalsBefore = await scriptCalls();
  const responses = [];
  for (let i = 0; i < 4; i += 1) responses.push(await site.fetch("/", { ip: "203.0.113.40" }));
  assert.deepEqual(responses.map((r) => r.status), [200, 200, 200, 429]);
  assert.equal(await scriptCalls() - evalsBefore, 4, "one script call per request");
  assert.equal(
    responses[0].headers.get("ratelimit-policy"),
    `"${name}/sliding_log-10000ms";q=3;w=10, "${name}-hourly";q=10;w=60`,
  );
  assert.match(responses[2].headers.get("ratelimit"), new RegExp(`^"${name}/sliding_log-10000ms";r=0;t=\\d+, "${name}-hourly";r=7;t=\\d+$`));
  assert.match(responses[3].headers.get("ratelimit"), /;r=0;t=\d+, .*;r=7;t=\d+$/, "a refusal takes nothing from either");
});

/** How many scripts Redis has run so far (EVALSHA + EVAL). */
async function scriptCalls() {
  const stats = await redis("INFO", "commandstats");
  return [...stats.matchAll(/cmdstat_(?:evalsha|eval):calls=(\d+)/g)].reduce((sum, [, calls]) => sum + Number(calls), 0);
}

test("allowed requests reach the origin unchanged: method, path, query, headers, body; responses stream", async () => {
  const site = await worker([{ name: uniqueName("proxy"), limits: [{ algorithm: "gcra", limit: 100, interval: "1 s", rate: 100 }] }]);
  const body = "x".repeat(200_000);
  const response = await site.fetch("/upload/file.txt?mode=append&n=2", {
    method: "PUT",
    body,
    headers: { "content-type": "text/plain", "x-custom": "kept", authorization: "Bearer abc" },
  });
  assert.equal(response.status, 200);
  assert.match(response.headers.get("ratelimit"), /;r=99;/);
  const echoed = await response.json();
  assert.equal(echoed.method, "PUT");
  assert.equal(echoed.path, "/upload/file.txt?mode=append&n=2");
  assert.equal(echoed.headers["x-custom"], "kept");
  assert.equal(echoed.headers.authorization, "Bearer abc");
  assert.equal(echoed.body, body);

  // Miniflare's emulation of Cloudflare's edge compression buffers a whole response when the client accepts gzip
  // (workers-sdk#8004); asking for identity keeps it out of the way, so the test sees what the Worker does.
  const streamed = await site.fetch("/stream", { headers: { "accept-encoding": "identity" } });
  const reader = streamed.body.getReader();
  const first = await reader.read();
  assert.equal(new TextDecoder().decode(first.value), "first chunk;", "the first chunk arrives while the origin is still sending");
  origin.releaseStream();
  let rest = "";
  for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) rest += new TextDecoder().decode(chunk.value);
  assert.equal(rest, "second chunk");
});

test("spellings an origin reads as one path are limited as one: %-encoded letters, doubled slashes, a trailing slash, case", async () => {
  const site = await worker([{ name: uniqueName("login"), match: { pattern: "/login" }, limits: [{ algorithm: "fixedWindow", limit: 2, interval: "1 m" }] }]);
  const statuses = [];
  for (const path of ["/login", "/%6Cogin", "//login", "/login/", "/LOGIN"]) {
    const response = await site.fetch(path, { ip: "192.0.2.202" });
    statuses.push(response.status);
    await response.text();
  }
  assert.deepEqual(statuses, [200, 200, 429, 429, 429]);
});

test("requests no rule matches go to the origin without a round trip or RateLimit fields", async () => {
  const site = await worker([{ name: uniqueName("only-api"), match: { pattern: "/api/**", methods: ["POST"] }, limits: FIVE_PER_10S }]);
  const before = await scriptCalls();
  const response = await site.fetch("/api/items", { method: "GET" });
  assert.equal(response.status, 200);
  assert.equal(response.headers.get("ratelimit"), null);
  assert.equal(await scriptCalls(), before);
});

test("dry run: everything reaches the origin, would-be refusals are logged after the response", async () => {
  const name = uniqueName("shadow");
  const site = await worker([{ name, dryRun: true, limits: [{ algorithm: "fixedWindow", limit: 1, interval: "1 m" }] }]);
  for (let i = 0; i < 3; i += 1) {
    const response = await site.fetch("/", { ip: "192.0.2.200" });
    assert.equal(response.status, 200);
    assert.equal(response.headers.get("ratelimit"), null, "a dry run decides after the response");
    await response.text();
  }
  await eventually(() => site.logs.join("").split("would refuse").length - 1 === 2, () => site.logs.join(""));
  const line = site.logs.join("").split("\n").find((text) => text.includes("would refuse"));
  assert.deepEqual(JSON.parse(line.slice(line.indexOf("{"))), {
    edgelimit: "dry run: would refuse",
    rule: name,
    key: "ip:192.0.2.200",
    reason: "decided",
    status: 429,
  });
});

test("a dry run before another rule lifts it not: the first rule after it that enforces decides", async () => {
  const [trial, enforced] = [uniqueName("trial"), uniqueName("enforced")];
  const site = await worker([
    { name: trial, dryRun: true, limits: [{ algorithm: "fixedWindow", limit: 1, interval: "1 m" }] },
    { name: enforced, limits: [{ algorithm: "fixedWindow", limit: 2, interval: "1 m" }] },
  ]);
  const statuses = [];
  for (let i = 0; i < 3; i += 1) {
    const response = await site.fetch("/", { ip: "192.0.2.201" });
    statuses.push(response.status);
    await response.text();
  }
  assert.deepEqual(statuses, [200, 200, 429]);
  await eventually(() => site.logs.join("").includes("would refuse"), () => site.logs.join(""));
  assert.ok(site.logs.join("").includes(`"rule":"${trial}"`), site.logs.join(""));
});

async function eventually(check, describe, timeoutMs = 5_000) {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) assert.fail(`not within ${timeoutMs} ms: ${describe()}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

test("allow list: never limited, no round trip; deny list: 403 problem, never reaches the origin", async () => {
  const name = uniqueName("lists");
  const site = await worker([
    {
      name,
      allow: ["10.0.0.0/8", "2001:db8:aaaa::/48"],
      deny: ["203.0.113.66"],
      limits: [{ algorithm: "fixedWindow", limit: 1, interval: "1 m" }],
    },
  ]);
  const before = await scriptCalls();
  for (const ip of ["10.1.2.3", "10.1.2.3", "2001:db8:aaaa:1::5", "2001:db8:aaaa:1::5"]) {
    assert.equal((await site.fetch("/", { ip })).status, 200);
  }
  assert.equal(await scriptCalls(), before);
  const hitsBefore = origin.hits.length;
  const denied = await site.fetch("/", { ip: "203.0.113.66" });
  assert.equal(denied.status, 403);
  assert.equal(denied.headers.get("content-type"), "application/problem+json");
  assert.equal((await denied.json()).detail, `refused by the deny list of rule "${name}"`);
  assert.equal(origin.hits.length, hitsBefore);
});

test("a format suffix and an escaped backslash reach the handler of the path without them, and its rule holds them", async () => {
  const site = await worker([{ name: uniqueName("sign-in"), match: { pattern: "/users/sign_in", methods: ["POST"] }, limits: [{ algorithm: "fixedWindow", limit: 2, interval: "1 m" }] }]);
  const statuses = [];
  // Rails routes `/users/sign_in.json` to the sign-in action; IIS reads `%5C` as `/`.
  for (const path of ["/users/sign_in.json", "/users%5Csign_in", "/users/sign_in.xml", "/users/sign_in"]) {
    const response = await site.fetch(path, { method: "POST", ip: "192.0.2.209" });
    statuses.push(response.status);
    await response.text();
  }
  assert.deepEqual(statuses, [200, 200, 429, 429]);
});

test("a method override adds a rule, never takes a request out of its own: a write named a read is counted as both", async () => {
  const items = (name, method, limit) => ({ name, match: { pattern: "/items/**", methods: [method] }, limits: [{ algorithm: "fixedWindow", limit, interval: "1 m" }] });
  const site = await worker([items(uniqueName("reads"), "GET", 1000), items(uniqueName("writes"), "POST", 2)]);
  const statuses = [];
  for (const [path, headers] of [["/items/1", { "x-http-method-override": "GET" }], ["/items/1?_method=GET", {}], ["/items/1", { "x-http-method-override": "GET" }]]) {
    const response = await site.fetch(path, { method: "POST", ip: "192.0.2.203", headers });
    statuses.push(response.status);
    await response.text();
  }
  assert.deepEqual(statuses, [200, 200, 429]);
});

test("a key's spellings count as one, and a second value counts by the IP, which a deny list still refuses by value", async () => {
  const site = await worker([{ name: uniqueName("sessions"), key: "cookie:session", deny: ["banned"], limits: [{ algorithm: "fixedWindow", limit: 1, interval: "1 m" }] }]);
  const status = async (cookie, ip) => {
    const response = await site.fetch("/", { ip, headers: { cookie } });
    await response.text();
    return response.status;
  };
  assert.equal(await status("session=real", "192.0.2.204"), 200);
  for (const spelling of ["session=r%65al", "session= real", 'session="real"']) {
    assert.equal(await status(spelling, "192.0.2.205"), 429, spelling);
  }
  // Two values: origins read one or the other, so a fresh one added to every request would be a fresh limit.
  assert.equal(await status("session=fresh1; session=real", "192.0.2.206"), 200);
  assert.equal(await status("session=fresh2; session=real", "192.0.2.206"), 429, "counted by the IP");
  assert.equal(await status("session=fresh3; session=banned", "192.0.2.207"), 403);
  assert.equal(await status("session=b%61nned", "192.0.2.208"), 403, "a listed value in another spelling");
});

test("a denied address stays denied on a rule keyed by a header, whatever value it sends", async () => {
  const name = uniqueName("deny-keyed");
  const site = await worker([
    { name, key: "header:x-api-key", deny: ["203.0.113.66"], limits: [{ algorithm: "fixedWindow", limit: 5, interval: "1 m" }] },
  ]);
  for (const headers of [{}, { "x-api-key": "made-up" }]) {
    assert.equal((await site.fetch("/", { ip: "203.0.113.66", headers })).status, 403, JSON.stringify(headers));
  }
  assert.equal((await site.fetch("/", { ip: "198.51.100.1", headers: { "x-api-key": "made-up" } })).status, 200);
});

test("store unreachable or slow: fail-open rules proxy, fail-closed rules answer 503; both are logged", async () => {
  const stalled = await startStalledEndpoint();
  try {
    const rules = [
      { name: "open", match: { path: "/open" }, limits: FIVE_PER_10S },
      { name: "closed", match: { path: "/closed" }, onError: "deny", timeout: "300ms", limits: FIVE_PER_10S },
    ];
    // Port 1: nothing listens there, and unlike a port that was free a moment ago, no Miniflare started meanwhile
    // can have taken it (one did, and answered 404).
    const down = await worker(rules, { EDGELIMIT_URL: "http://127.0.0.1:1" });
    const slow = await worker(rules, { EDGELIMIT_URL: stalled.url });
    for (const site of [down, slow]) {
      const open = await site.fetch("/open");
      assert.equal(open.status, 200);
      assert.equal(open.headers.get("x-origin"), "yes");
      assert.equal(open.headers.get("ratelimit"), null, "nothing is known of the limit");
      const closed = await site.fetch("/closed");
      assert.equal(closed.status, 503);
      assert.equal((await closed.json()).detail, 'rule "closed" could not reach its rate-limit store and fails closed; try again shortly');
    }
    await eventually(() => down.logs.join("").includes('"rule":"closed"'), () => down.logs.join(""));
    assert.match(down.logs.join(""), /"edgelimit":"store unavailable","rule":"open".*"reason":"error","status":200,"error":"could not reach the REST endpoint at http:\/\/127\.0\.0\.1:1: .*","code":"EDGELIMIT_TRANSPORT"/);
    await eventually(() => slow.logs.join("").includes('"reason":"timeout"'), () => slow.logs.join(""));
    assert.match(slow.logs.join(""), /"rule":"closed".*"reason":"timeout".*no reply from the REST endpoint within 300 ms/);
  } finally {
    stalled.stop();
  }
});

test("a wrong token is a 500 even for a fail-open rule, never the origin, and is logged", async () => {
  const hits = origin.hits.length;
  const site = await worker([{ name: "guarded", onError: "allow", limits: FIVE_PER_10S }], { EDGELIMIT_TOKEN: "wrong" });
  const response = await site.fetch("/");
  assert.equal(response.status, 500);
  assert.equal((await response.json()).detail, 'rule "guarded" could not decide (EDGELIMIT_AUTH); the request was not let through');
  assert.equal(origin.hits.length, hits, "nothing reached the origin");
  await eventually(() => site.logs.join("").includes("EDGELIMIT_AUTH"), () => site.logs.join(""));
  assert.match(site.logs.join(""), /"edgelimit":"error","rule":"guarded".*"status":500.*rejected the token \(HTTP 401\)/);
});

test("another program's state under a fail-open rule's key is a 500 with EDGELIMIT_FOREIGN_STATE, every time", async () => {
  const name = uniqueName("foreign");
  const site = await worker([{ name, onError: "allow", limits: FIVE_PER_10S }]);
  assert.equal((await site.fetch("/", { ip: "203.0.113.9" })).status, 200);
  const [key] = await redis("KEYS", `edgelimit:{${name}/*`);
  await redis("DEL", key);
  await redis("HSET", key, "f", "v");
  const hits = origin.hits.length;
  for (let i = 0; i < 3; i += 1) {
    const response = await site.fetch("/", { ip: "203.0.113.9" });
    assert.equal(response.status, 500);
    assert.equal(response.headers.get("content-type"), "application/problem+json");
  }
  assert.equal(origin.hits.length, hits, "nothing reached the origin");
  await eventually(() => site.logs.join("").includes("EDGELIMIT_FOREIGN_STATE"), () => site.logs.join(""));
  assert.match(site.logs.join(""), /"edgelimit":"error".*"status":500.*WRONGTYPE/);
});

test("a read-only Redis is absorbed by the rule's policy and logged as a store health warning", async () => {
  const name = uniqueName("replica");
  const site = await worker([
    { name, match: { path: "/open" }, limits: FIVE_PER_10S },
    { name: `${name}-closed`, match: { path: "/closed" }, onError: "deny", limits: FIVE_PER_10S },
  ]);
  // Port 1: no primary listens there, so the replica never syncs (which would wipe it) and stays read-only.
  await redis("REPLICAOF", "127.0.0.1", "1");
  try {
    const open = await site.fetch("/open", { ip: "203.0.113.10" });
    assert.equal(open.status, 200);
    assert.equal(open.headers.get("x-origin"), "yes");
    await open.text();
    assert.equal((await site.fetch("/closed", { ip: "203.0.113.10" })).status, 503);
  } finally {
    await redis("REPLICAOF", "NO", "ONE");
  }
  await eventually(() => site.logs.join("").includes('"store health"'), () => site.logs.join(""));
  assert.match(site.logs.join(""), /"edgelimit":"store unavailable","rule":"replica-[^"]*".*"status":200.*"code":"EDGELIMIT_READONLY"/);
  assert.match(site.logs.join(""), /"edgelimit":"store health","rule":"replica-[^"]*","code":"EDGELIMIT_READONLY"/);
});

test("two Worker instances share one limit", async () => {
  const name = uniqueName("shared");
  const rules = [{ name, limits: FIVE_PER_10S }];
  const [first, second] = [await worker(rules), await worker(rules)];
  const statuses = [];
  for (let i = 0; i < 6; i += 1) {
    statuses.push((await (i % 2 === 0 ? first : second).fetch("/", { ip: "198.51.100.77" })).status);
  }
  assert.deepEqual(statuses, [200, 200, 200, 200, 200, 429]);
});

test("EDGELIMIT_LAYOUT per-identifier: a rule's limits for one client are kept under one hash tag, the client's", async () => {
  const name = uniqueName("spread");
  const limits = [...FIVE_PER_10S, { algorithm: "fixedWindow", limit: 100, interval: "1 h" }];
  const site = await worker([{ name, key: "ip", limits }], { EDGELIMIT_LAYOUT: "per-identifier" });
  const statuses = [];
  for (let i = 0; i < 6; i += 1) {
    const response = await site.fetch("/", { ip: "198.51.100.77" });
    statuses.push(response.status);
    await response.text();
  }
  assert.deepEqual(statuses, [200, 200, 200, 200, 200, 429]);
  const keys = (await redis("KEYS", `edgelimit:v2*:${name}/*`)).sort();
  assert.deepEqual(keys, [`edgelimit:v2{ip:198.51.100.77}:${name}/fixed_window-3600000ms`, `edgelimit:v2{ip:198.51.100.77}:${name}/sliding_log-10000ms`]);
});

test("a malformed configuration stops the Worker from starting, saying what is wrong", async () => {
  const refusal = async (rules, extra) => {
    try {
      await worker(rules, extra);
    } catch (error) {
      return error.message;
    }
    assert.fail("the Worker started");
  };
  const cases = [
    // A field a limit does not have (@upstash/ratelimit's name for the rate), and a rate where the algorithm has
    // none: either would leave the limit other than meant.
    [[{ name: "a", limits: [{ algorithm: "tokenBucket", limit: 10, interval: "1 s", refillRate: 1 }] }], {},
      'RULES[0].limits[0] has an unknown field \"refillRate\"'],
    [[{ name: "a", limits: [{ algorithm: "fixedWindow", limit: 10, interval: "1 s", rate: 1 }] }], {},
      "RULES[0].limits[0].rate: a fixed-window limit has no rate"],
    // A header name that is no HTTP token would make every request fail.
    [[{ name: "a", key: "header:x-api-key,", limits: FIVE_PER_10S }], {}, "letters, digits"],
    [[{ name: "a", limits: [{ algorithm: "slidingLog", limit: 5, interval: 10 }] }], {},
      'RULES[0].limits[0].interval must be a duration with a unit, like \\"10 s\\" or \\"250ms\\", got the number 10'],
    [[{ name: "a", limits: FIVE_PER_10S, dryrun: true }], {}, 'RULES[0] has an unknown field \\"dryrun\\"'],
    [[{ name: "a", key: "user", limits: FIVE_PER_10S }], {}, 'RULES[0].key: key must be \\"ip\\", \\"ip/<IPv6 prefix bits>\\", \\"path\\"'],
    [[{ name: "a", key: "ip/128", limits: FIVE_PER_10S }], {}, "from 1 to 64 (one subscriber picks any address in its /64)"],
    [[{ name: "a", allow: ["localhost"], limits: FIVE_PER_10S }], {}, 'RULES[0].allow: \\"localhost\\" is not an IP address or range'],
    [[{ name: "a", limits: [] }], {}, 'rule \\"a\\": no limits'],
    [[{ name: "a", reserve: "100 ms", limits: [{ algorithm: "slidingWindow", limit: 5, interval: "10 s" }] }], {},
      'rule \\"a\\": limiter'],
    [[{ name: "a", reserve: "6 s", limits: FIVE_PER_10S }], {}, "use at most 5000 ms"],
    [[{ name: "a", reserve: 100, limits: FIVE_PER_10S }], {}, 'RULES[0].reserve must be a duration with a unit'],
    [[], { RULES: "[{name: 'a'}]" }, "RULES is not valid JSON"],
    [[], { ORIGIN: "" }, "ORIGIN is not set"],
    [[], {}, "RULES is empty"],
    [[{ name: "a", limits: FIVE_PER_10S }], { EDGELIMIT_LAYOUT: "cluster" }, 'layout must be \\"per-limiter\\"'],
    // Credentials in the URL: Node's and browsers' fetch refuse it on every call, which a fail-open rule would admit;
    // the token is the credential. Not echoed back.
    [[{ name: "a", limits: FIVE_PER_10S }], { EDGELIMIT_URL: "http://user:secret@127.0.0.1:8079" }, "the REST URL holds credentials"],
  ];
  for (const [rules, extra, expected] of cases) {
    const message = await refusal(rules, extra);
    assert.ok(message.includes(expected.replaceAll('\\"', '"')) || message.includes(expected), `expected ${expected} in:\n${message}`);
    assert.doesNotMatch(message, /secret/);
  }
});

test("a trap in the wasm core (a panic) re-initialises it; the request and the ones after are decided normally", async () => {
  const trapping = bundleWorker("tests/js/trapping-worker.js");
  try {
    const name = uniqueName("trap");
    const site = await startWorker(trapping, varsFor(stack, origin, [{ name, limits: [{ algorithm: "fixedWindow", limit: 3, interval: "1 m" }] }]));
    workers.push(site);
    const statuses = [];
    for (const trap of [false, true, false, false]) {
      const response = await site.fetch("/", { ip: "192.0.2.123", headers: trap ? { "x-trap": "1" } : {} });
      statuses.push(response.status);
      await response.text();
    }
    assert.deepEqual(statuses, [200, 200, 200, 429]);
    assert.match(site.logs.join(""), /edgelimit: the wasm core trapped \(unreachable\); re-initialised it/);
  } finally {
    trapping.remove();
  }
});

/** `count` requests to `site` from `ip`, one after another, each let through: their RateLimit fields. */
async function rateLimitFields(site, count, ip) {
  const fields = [];
  for (let i = 0; i < count; i += 1) {
    const response = await site.fetch("/", { ip });
    if (response.status !== 200) assert.fail(await response.text());
    fields.push(response.headers.get("ratelimit"));
    await response.text();
  }
  return fields;
}

test("reserve: a key this isolate sees often is answered from reserved permits, with fewer round trips", async () => {
  const name = uniqueName("reserved");
  const site = await worker([
    { name, reserve: "200 ms", limits: [{ algorithm: "gcra", limit: 1000, interval: "1 s", rate: 1000 }] },
  ]);
  const before = await scriptCalls();
  const fields = await rateLimitFields(site, 40, "192.0.2.77");
  // RateLimit fields from Redis's decisions as they are, and from reserved permits marked as an estimate (what
  // this isolate holds of its own).
  assert.match(fields[0], /^"[^"]+";r=\d+;t=\d+$/);
  assert.ok(fields.some((field) => /^"[^"]+";r=\d+;t=\d+;estimate$/.test(field)), fields.join(" | "));
  // The first requests ask Redis and reserve as many as were asked lately; later ones take those with no round trip.
  const calls = (await scriptCalls()) - before;
  assert.ok(calls < 40, `${calls} script calls for 40 requests`);
  // Requests of one isolate at once on a fresh key: each is answered (none waits on another request's call, which
  // workerd would cancel when that request ends), and all within the limit are granted.
  const responses = await Promise.all(
    Array.from({ length: 20 }, () => site.fetch("/", { ip: "192.0.2.78" })),
  );
  for (const response of responses) {
    if (response.status !== 200) assert.fail(`${response.status}: ${await response.text()}`);
    await response.text();
  }
});

test("reserve: a rule of several limits answers a key this isolate sees often from reserved permits of each", async () => {
  const name = uniqueName("reserved-all");
  const site = await worker([
    {
      name,
      reserve: "200 ms",
      limits: [
        { algorithm: "gcra", limit: 1000, interval: "1 s", rate: 1000 },
        { algorithm: "slidingLog", limit: 1000, interval: "1 m" },
      ],
    },
  ]);
  const before = await scriptCalls();
  const fields = await rateLimitFields(site, 60, "192.0.2.79");
  // Granted from both limits' reserved permits (marked as an estimate), and fewer script calls than requests: a
  // request Redis decides makes one call, and one more for each limit that reserves.
  assert.ok(fields.some((field) => /;estimate$/.test(field)), fields.join(" | "));
  const calls = (await scriptCalls()) - before;
  assert.ok(calls < 60, `${calls} script calls for 60 requests`);
});
