// The deadline header (`edgelimit-deadline-ms`, DEADLINE_HEADER in src/rest/mod.rs) tells the bridge how long the
// client waits. Outside a browser it is sent; in a browser (a page, or a Web Worker, which has no `document`) it
// is left out, because a header of our own needs a CORS preflight's approval that an endpoint may not give, and then
// every request would fail (and a fail-open policy admit it). Each case is a fresh Node process, since
// src/rest/fetch.js reads its runtime once, when the package loads.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { once } from "node:events";
import { createServer } from "node:http";
import { test } from "node:test";

/** The headers of the one request a client makes from a fresh Node process set up by `setup` (JS source). */
async function headersSentAfter(setup) {
  const seen = [];
  const server = createServer((request, response) => {
    seen.push(request.headers);
    // Any well-formed REST reply ends the request: only its headers matter here.
    response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ error: "ERR test endpoint" }));
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const url = `http://127.0.0.1:${server.address().port}`;
  const script = `${setup}
    const { Ratelimit } = await import("edgelimit");
    const limiter = new Ratelimit({ url: ${JSON.stringify(url)}, token: "t", limiter: Ratelimit.fixedWindow(1, "1 s"), timeout: 1234, onError: "deny" });
    // An error no policy absorbs (as it should be): only the request's headers matter here.
    await limiter.limit("id").catch(() => {});`;
  try {
    // Asynchronously: this process's server must answer the child's request meanwhile.
    await new Promise((resolve, reject) => {
      execFile(process.execPath, ["--input-type=module", "-e", script], (error, _stdout, stderr) =>
        error ? reject(new Error(`${error.message}\n${stderr}`)) : resolve(),
      );
    });
  } finally {
    server.close();
  }
  assert.equal(seen.length, 1, "one request");
  return seen[0];
}

test("outside a browser (Node) the deadline header carries the timeout", async () => {
  const headers = await headersSentAfter("");
  assert.equal(headers["edgelimit-deadline-ms"], "1234");
  assert.equal(headers.authorization, "Bearer t");
});

test("in a browser's Web Worker (a Mozilla/… user agent, no document) the deadline header is left out", async () => {
  const worker = `Object.defineProperty(globalThis, "navigator", { value: { userAgent: "Mozilla/5.0 (X11; Linux x86_64) Chrome/130.0" }, configurable: true });`;
  const headers = await headersSentAfter(worker);
  assert.equal(headers["edgelimit-deadline-ms"], undefined);
  assert.equal(headers.authorization, "Bearer t");
});
