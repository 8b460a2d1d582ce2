// Local errors are errors: only the store's unavailability reaches a fail-open policy (onError "allow"). A URL the
// runtime will not fetch is refused when the client is made.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Ratelimit, RestClient } from "edgelimit";

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
