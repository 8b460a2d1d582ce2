// The official @upstash/redis client, unmodified, against the edgelimit bridge over a real Redis.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { startStack, upstashRedis, waitFor } from "./harness.mjs";

let stack;
let redis;
before(async () => {
  stack = await startStack();
  // The client's defaults: base64 response encoding, automatic JSON (de)serialisation.
  redis = upstashRedis(stack);
});
after(() => stack.stop());

test("strings, integers and nil", async () => {
  assert.equal(await redis.ping(), "PONG");
  assert.equal(await redis.set("greeting", "héllo wörld ✓"), "OK");
  assert.equal(await redis.get("greeting"), "héllo wörld ✓");
  assert.equal(await redis.get("missing"), null);
  assert.equal(await redis.incrby("counter", 41), 41);
  assert.equal(await redis.incr("counter"), 42);
  assert.deepEqual(await redis.set("json", { a: [1, 2] }), "OK");
  assert.deepEqual(await redis.get("json"), { a: [1, 2] });
});

test("arrays and hashes", async () => {
  await redis.rpush("list", "a", "b", "c");
  assert.deepEqual(await redis.lrange("list", 0, -1), ["a", "b", "c"]);
  await redis.hset("hash", { field: "value", n: 3 });
  assert.deepEqual(await redis.hgetall("hash"), { field: "value", n: 3 });
  await redis.zadd("z", { score: 2, member: "two" }, { score: 1, member: "one" });
  assert.deepEqual(await redis.zrange("z", 0, -1, { withScores: true }), ["one", 1, "two", 2]);
});

test("pipeline with a failing command in the middle", async () => {
  const p = redis.pipeline();
  p.set("p", "1");
  p.hset("p", { f: "v" });
  p.incr("p");
  const results = await p.exec({ keepErrors: true });
  assert.equal(results[0].result, "OK");
  assert.match(results[1].error, /^WRONGTYPE/);
  assert.equal(results[2].result, 2);
});

test("multi-exec runs atomically", async () => {
  const tx = redis.multi();
  tx.incr("tx");
  tx.incr("tx");
  tx.get("tx");
  assert.deepEqual(await tx.exec(), [1, 2, 2]);
});

test("eval, evalsha and scriptLoad, with and without Upstash's shebang", async () => {
  assert.deepEqual(await redis.eval("return {KEYS[1], ARGV[1], 7}", ["k"], ["v"]), ["k", "v", 7]);
  const plain = "return redis.call('INCR', KEYS[1])";
  const sha = await redis.scriptLoad(plain);
  assert.equal(await redis.evalsha(sha, ["e"], []), 1);
  const flagged = "#!lua flags=allow-key-locking\nreturn redis.call('INCRBY', KEYS[1], ARGV[1])";
  const flaggedSha = await redis.scriptLoad(flagged);
  assert.equal(flaggedSha.length, 40);
  assert.equal(await redis.evalsha(flaggedSha, ["f"], [5]), 5);
  assert.equal(await redis.eval(flagged, ["f"], [5]), 10);
  assert.deepEqual(await redis.scriptExists(flaggedSha), [1]);
});

test("createScript: EVALSHA with NOSCRIPT fallback after SCRIPT FLUSH", async () => {
  const script = redis.createScript("#!lua flags=allow-key-locking\nreturn ARGV[1] .. '!'");
  assert.equal(await script.exec([], ["hi"]), "hi!");
  await redis.scriptFlush();
  assert.equal(await script.exec([], ["again"]), "again!");
});

test("control characters survive the base64 response encoding", async () => {
  const raw = upstashRedis(stack, { automaticDeserialization: false });
  await raw.set("nul", "a\u0000b\u0001c");
  assert.equal(await raw.get("nul"), "a\u0000b\u0001c");
});

test("booleans are stored as the text true/false: POST /, /pipeline and /multi-exec", async () => {
  // The client sends booleans as JSON booleans, ["set","bool",true]; Upstash stores their text. Without
  // auto-pipelining each call is one POST /; with it (the default, `redis`) calls go through /pipeline.
  const single = upstashRedis(stack, { enableAutoPipelining: false });
  const raw = upstashRedis(stack, { automaticDeserialization: false, enableAutoPipelining: false });
  assert.equal(await single.set("bool", true), "OK");
  assert.equal(await raw.get("bool"), "true");
  assert.equal(await single.get("bool"), true);
  assert.equal(await redis.set("bool", false), "OK");
  assert.equal(await raw.get("bool"), "false");
  assert.equal(await redis.get("bool"), false);
  const p = redis.pipeline();
  p.set("pbool", false);
  p.get("pbool");
  p.hset("hbool", { on: true, off: false });
  p.hgetall("hbool");
  assert.deepEqual(await p.exec(), ["OK", false, 2, { on: true, off: false }]);
  assert.equal(await raw.get("pbool"), "false");
  assert.deepEqual([await raw.hget("hbool", "on"), await raw.hget("hbool", "off")], ["true", "false"]);
  const tx = redis.multi();
  tx.set("tbool", true);
  tx.get("tbool");
  assert.deepEqual(await tx.exec(), ["OK", true]);
});

test("an error nested in a script's reply reaches the client as its text, the same on every route", async () => {
  const script = "return {1, redis.error_reply('ERR nested x'), {err='E2'}}";
  const expected = [1, "ERR nested x", "E2"];
  const single = upstashRedis(stack, { enableAutoPipelining: false });
  assert.deepEqual(await single.eval(script, [], []), expected);
  assert.deepEqual(await redis.eval(script, [], []), expected);
  const p = redis.pipeline();
  p.eval(script, [], []);
  p.ping();
  assert.deepEqual(await p.exec(), [expected, "PONG"]);
  const tx = redis.multi();
  tx.eval(script, [], []);
  tx.ping();
  assert.deepEqual(await tx.exec(), [expected, "PONG"]);
});

test("subscribe and psubscribe over server-sent events: exact messages, and unsubscribing leaves nothing behind", async () => {
  // A client without deserialization sees each payload exactly as it was published.
  const raw = upstashRedis(stack, { automaticDeserialization: false, enableAutoPipelining: false });
  const numsub = async (channel) => (await raw.exec(["PUBSUB", "NUMSUB", channel]))[1];
  const numpat = () => raw.exec(["PUBSUB", "NUMPAT"]);
  const seen = [];
  const errors = [];
  const subscriber = redis.subscribe("news");
  subscriber.on("subscribe", (count) => seen.push(["subscribe", count]));
  subscriber.on("message", (event) => seen.push(["message", event]));
  subscriber.on("error", (error) => errors.push(error));
  const patternSeen = [];
  const patternSubscriber = raw.psubscribe("ne*");
  patternSubscriber.on("psubscribe", (count) => patternSeen.push(["psubscribe", count]));
  patternSubscriber.on("pmessage", (event) => patternSeen.push(["pmessage", event]));
  patternSubscriber.on("error", (error) => errors.push(error));
  await waitFor("both subscriptions in Redis", async () => (await numsub("news")) === 1 && (await numpat()) === 1);
  await waitFor("the confirmations", () => seen.length === 1 && patternSeen.length === 1);

  const object = { text: "héllo, wörld ✓", n: [1, 2] };
  const text = "plain text, with commas: ✓";
  assert.equal(await redis.publish("news", object), 2);
  assert.equal(await redis.publish("news", text), 2);
  assert.equal(await redis.publish("elsewhere", "unheard"), 0);
  await waitFor("the messages", () => seen.length === 3 && patternSeen.length === 3);
  assert.deepEqual(seen, [
    ["subscribe", 1],
    ["message", { channel: "news", message: object }],
    ["message", { channel: "news", message: text }],
  ]);
  assert.deepEqual(patternSeen, [
    ["psubscribe", 1],
    ["pmessage", { pattern: "ne*", channel: "news", message: JSON.stringify(object) }],
    ["pmessage", { pattern: "ne*", channel: "news", message: text }],
  ]);
  assert.deepEqual(errors, []);

  // Unsubscribing aborts the request: the bridge closes that subscription's Redis connection.
  await subscriber.unsubscribe();
  await waitFor("the channel subscription gone from Redis", async () => (await numsub("news")) === 0);
  await patternSubscriber.unsubscribe();
  await waitFor("the pattern subscription gone from Redis", async () => (await numpat()) === 0);
  assert.equal(await redis.publish("news", "after"), 0);
});

test("subscribe with a limiter token: the subscriber's error listeners get the bridge's refusal", async () => {
  const limiter = upstashRedis(stack, { token: stack.limiterToken });
  const subscriber = limiter.subscribe("news");
  const errors = [];
  subscriber.on("error", (error) => errors.push(error));
  await waitFor("the refusal", () => errors.length === 1);
  assert.equal(errors[0].name, "UpstashError");
  assert.match(errors[0].message, /^NOPERM this token's profile \(limiter\) may not subscribe: pub\/sub needs an admin token/);
  await subscriber.unsubscribe();
});

test("a command error is thrown with Redis's text", async () => {
  await redis.set("s", "x");
  await assert.rejects(redis.lpush("s", "y"), /WRONGTYPE/);
});

test("a wrong token is refused", async () => {
  const intruder = upstashRedis(stack, { token: "wrong", retry: false });
  await assert.rejects(intruder.ping(), /Unauthorized/);
});

test("Redis stopped and restarted: clean errors, then recovery without restarting the bridge", async () => {
  const client = upstashRedis(stack, { retry: false });
  await stack.stopRedis();
  await assert.rejects(client.ping(), /unavailable/);
  await assert.rejects(client.ping(), /unavailable/);
  await stack.restartRedis();
  let pong;
  for (let i = 0; i < 20 && pong !== "PONG"; i++) {
    pong = await client.ping().catch(() => undefined);
    if (pong !== "PONG") await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal(pong, "PONG");
});
