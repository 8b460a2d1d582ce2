// A redirect from the endpoint is never followed by the package (src/rest/fetch.js, `redirect: "manual"`): followed,
// the call would go elsewhere (as a GET, without the token) and whatever answered there would be read as the
// store's decision. It rejects with EDGELIMIT_ENDPOINT, which no failure policy absorbs.
import assert from "node:assert/strict";
import { once } from "node:events";
import { createServer } from "node:http";
import { test } from "node:test";
import { Ratelimit } from "edgelimit";

async function serve(handler) {
  const server = createServer(handler).listen(0, "127.0.0.1");
  await once(server, "listening");
  return [server, `http://127.0.0.1:${server.address().port}`];
}

test("a redirect is reported, never followed, whatever onError says", async () => {
  let followed = 0;
  // Where the redirect points: it would grant everything, had the client gone there.
  const [elsewhere, elsewhereUrl] = await serve((_request, response) => {
    followed += 1;
    response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ result: "ZzE3MDAwMDAwMDA6MDo=" }));
  });
  const [redirecting, url] = await serve((_request, response) => {
    response.writeHead(302, { location: `${elsewhereUrl}/` }).end();
  });
  try {
    const limiter = new Ratelimit({ url, token: "t", limiter: Ratelimit.fixedWindow(1, "1 s"), onError: "allow" });
    for (let i = 0; i < 2; i++) {
      const error = await limiter.limit("id").then(
        (result) => assert.fail(`a redirect was taken for a decision: ${JSON.stringify(result)}`),
        (e) => e,
      );
      assert.deepEqual([error.code, error.storeUnavailable], ["EDGELIMIT_ENDPOINT", false]);
      assert.match(error.message, /HTTP 302.*never followed/);
    }
    assert.equal(followed, 0, "the redirect's target was never asked");
  } finally {
    redirecting.close();
    elsewhere.close();
  }
});
