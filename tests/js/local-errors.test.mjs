// Local errors are errors: only the store's unavailability reaches a fail-open policy (onError "allow"). A URL the
// runtime will not fetch is refused when the client is made; what a host process adds to Object.prototype changes
// no request. Real redis-server and bridge (harness.mjs).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Ratelimit, RestClient } from "edgelimit";
import { startStack } from "./harness.mjs";

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
