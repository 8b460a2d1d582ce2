// Local errors are errors: only the store's unavailability reaches a fail-open policy (onError "allow"). A URL the
// runtime will not fetch is refused when the client is made; a request `fetch` refuses in this process (a TypeError
// of its own, a polluted Object.prototype) rejects with EDGELIMIT_CLIENT; a real network failure (refused, reset,
// closed mid-reply) stays EDGELIMIT_TRANSPORT and is absorbed, in Node and in Chromium. Real redis-server and bridge
// (harness.mjs), real sockets for each failure.
import assert from "node:assert/strict";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { createServer as createHttpServer } from "node:http";
import { createServer } from "node:net";
import { join, normalize } from "node:path";
import { after, before, test } from "node:test";
import { Ratelimit, RestClient } from "edgelimit";
import { launchChromium } from "./browser-harness.mjs";
import { ROOT, freePort, startStack } from "./harness.mjs";

let stack;
before(async () => (stack = await startStack()));
after(() => stack.stop());

let prefixes = 0;
/** A fail-open limit of 2 per hour, under a prefix of its own. */
function twoPerHour(url = stack.url) {
  prefixes += 1;
  return new Ratelimit({ url, token: stack.token, prefix: `local-${prefixes}`, limiter: Ratelimit.fixedWindow(2, "1 h"), onError: "allow" });
}

/** What 4 decisions on one identifier gave: `true`/`false` per grant, or the rejection's code. */
async function fourDecisions(limits) {
  const outcomes = [];
  for (let i = 0; i < 4; i++) {
    outcomes.push(await limits.limit("id").then((result) => result.success, (error) => error.code));
  }
  return outcomes;
}

/** Runs `body` with `Object.prototype[name] = value`, as a careless library in the host process may set it. */
async function withPolluted(name, value, body) {
  Object.prototype[name] = value;
  try {
    return await body();
  } finally {
    delete Object.prototype[name];
  }
}

test("a URL with credentials is refused when the client is made, without echoing them", () => {
  for (const url of ["http://user:pw@127.0.0.1:8079", "https://user@example.com", "http://:pw@127.0.0.1:8079/"]) {
    for (const make of [
      () => new Ratelimit({ url, token: "t", limiter: Ratelimit.fixedWindow(2, "1 h") }),
      () => new RestClient(url, "t"),
    ]) {
      assert.throws(make, (error) => {
        assert.deepEqual([error.name, error.code, error.storeUnavailable], ["EdgelimitError", "EDGELIMIT_INVALID_CONFIG", false]);
        assert.match(error.message, /credentials.*token/);
        assert.doesNotMatch(error.message, /pw/);
        return true;
      }, url);
    }
  }
});

test("fetch options inherited from a polluted Object.prototype change no request: the limit holds exactly", async () => {
  // Each of these, read through the prototype, made every call fail in fetch's Request constructor.
  for (const [name, value] of [["cache", false], ["duplex", "bogus"], ["mode", "bogus"], ["credentials", "bogus"], ["referrerPolicy", "bogus"], ["redirect", "follow"], ["method", "GET"]]) {
    const limits = twoPerHour();
    const outcomes = await withPolluted(name, value, () => fourDecisions(limits));
    assert.deepEqual(outcomes, [true, true, false, false], `Object.prototype.${name} = ${JSON.stringify(value)}`);
  }
  const client = new RestClient(stack.url, stack.token);
  assert.equal(await withPolluted("cache", false, () => client.command(["ECHO", "through"])), "through");
});

test("a pollution fetch itself reads (Node's undici) rejects with EDGELIMIT_CLIENT, never granted", async () => {
  const cases = [
    // A TypeError of fetch's own, thrown before any I/O.
    ["window", 1, /'window' option/],
    // "fetch failed" with a cause that is no network error: an integrity check, a dispatcher that throws.
    ["integrity", "sha256-AAAA", /fetch failed: integrity mismatch/],
    ["dispatcher", { dispatch: () => { throw new Error("not a network error"); } }, /fetch failed: not a network error/],
  ];
  for (const [name, value, message] of cases) {
    const limits = twoPerHour();
    const error = await withPolluted(name, value, () =>
      limits.limit("id").then((result) => assert.fail(`allowed under Object.prototype.${name}: ${JSON.stringify(result)}`), (e) => e),
    );
    assert.deepEqual([error.name, error.code, error.storeUnavailable], ["EdgelimitError", "EDGELIMIT_CLIENT", false], name);
    assert.match(error.message, message);
    assert.match(error.message, /local error/);
  }
});

test("a port fetch refuses to connect to (the Fetch standard's blocked ports) is a local error, not an outage", async () => {
  const outcomes = await fourDecisions(twoPerHour("http://127.0.0.1:1"));
  assert.deepEqual(outcomes, Array(4).fill("EDGELIMIT_CLIENT"));
});

test("real network failures stay store-unavailable and are absorbed: refused, reset, closed mid-reply", async () => {
  const sockets = new Set();
  const serve = async (onConnection) => {
    const server = createServer((socket) => {
      sockets.add(socket);
      onConnection(socket);
    }).listen(0, "127.0.0.1");
    await once(server, "listening");
    return server;
  };
  const reset = await serve((socket) => socket.resetAndDestroy());
  const closed = await serve((socket) => socket.once("data", () => socket.destroy()));
  // Headers promise 100 bytes, 3 arrive: the body's read fails ("terminated").
  const truncated = await serve((socket) =>
    socket.once("data", () => socket.end("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n[{\"")),
  );
  try {
    const cases = [
      ["refused", `http://127.0.0.1:${await freePort()}`, /ECONNREFUSED/],
      ["reset", `http://127.0.0.1:${reset.address().port}`, /ECONNRESET/],
      ["closed", `http://127.0.0.1:${closed.address().port}`, /other side closed/],
      ["truncated", `http://127.0.0.1:${truncated.address().port}`, /terminated: other side closed/],
    ];
    for (const [what, url, message] of cases) {
      const result = await twoPerHour(url).limit("id");
      assert.deepEqual([result.success, result.reason, result.error.code, result.error.storeUnavailable], [true, "error", "EDGELIMIT_TRANSPORT", true], what);
      assert.match(result.error.message, message, what);
    }
  } finally {
    sockets.forEach((socket) => socket.destroy());
    for (const server of [reset, closed, truncated]) server.close();
  }
});

test("in Chromium, a network failure (\"Failed to fetch\") stays store-unavailable and is absorbed", async () => {
  // The package as a page loads it (browser.js), from a server of its own: the page and pkg/ share an origin.
  const server = createHttpServer((request, response) => {
    if (request.url === "/") return response.writeHead(200, { "content-type": "text/html" }).end("<!doctype html><title>t</title>");
    const file = join(ROOT, "pkg", normalize(request.url.split("?")[0]));
    const type = file.endsWith(".wasm") ? "application/wasm" : "text/javascript";
    let body;
    try {
      body = readFileSync(file);
    } catch {
      return response.writeHead(404).end();
    }
    response.writeHead(200, { "content-type": type }).end(body);
  }).listen(0, "127.0.0.1");
  await once(server, "listening");
  const browser = await launchChromium();
  try {
    const page = await browser.newPage();
    await page.goto(`http://127.0.0.1:${server.address().port}/`);
    const url = `http://127.0.0.1:${await freePort()}`;
    const result = await page.evaluate(async (url) => {
      const { Ratelimit } = await import("/browser.js");
      const limits = new Ratelimit({ url, token: "t", limiter: Ratelimit.fixedWindow(2, "1 h"), onError: "allow" });
      const { success, reason, error } = await limits.limit("id");
      return [success, reason, error.code, error.storeUnavailable, error.message];
    }, url);
    assert.deepEqual(result.slice(0, 4), [true, "error", "EDGELIMIT_TRANSPORT", true]);
    assert.match(result[4], /Failed to fetch/);
  } finally {
    await browser.close();
    server.close();
  }
});
