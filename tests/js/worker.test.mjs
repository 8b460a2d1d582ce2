// The Worker end to end: the bundle `wrangler deploy` would upload, in real workerd, deciding through the real
// bridge and redis-server, in front of a real local origin.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { freePort, startStack, startStalledEndpoint } from "./harness.mjs";
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
