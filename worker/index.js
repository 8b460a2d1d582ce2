// edgelimit as a Cloudflare Worker in front of an origin. This shim only moves requests and responses: which rule
// applies, whose key a request counts under, the lists, the one round trip to Redis and the RateLimit fields are
// all decided by the wasm core (src/gate, src/wasm/gate.rs). Configuration: wrangler.toml [vars] ORIGIN,
// EDGELIMIT_URL, RULES (and EDGELIMIT_PREFIX), the secret EDGELIMIT_TOKEN. See the README's "The Worker" section.
import { env } from "cloudflare:workers";
// The Worker's own build of the core (scripts/build-wasm): the npm package's classes left out.
import wasmModule from "./wasm/core_bg.wasm";
import { GateCore, initSync, __wbg_reset_state as resetWasmState } from "./wasm/core.js";

initSync({ module: wasmModule });

/** The origin's URL, checked once: a Worker that cannot say where to send requests must not start. */
function originOf(value) {
  if (typeof value !== "string" || value === "") {
    throw new Error("edgelimit: ORIGIN is not set: put the origin's URL in wrangler.toml [vars], e.g. ORIGIN = \"https://origin.example.com\"");
  }
  try {
    return new URL(value);
  } catch {
    throw new Error(`edgelimit: ORIGIN must be an absolute URL like "https://origin.example.com", got ${JSON.stringify(value)}`);
  }
}

// Both are built when the isolate starts, so a malformed RULES (or a missing setting) stops the Worker from starting
// with the reason — `wrangler dev` prints it, and Cloudflare refuses to deploy it — instead of failing requests.
const origin = originOf(env.ORIGIN);
// Request paths are appended to the origin's own path, if it has one.
const originPath = origin.pathname.replace(/\/$/, "");
let gate = new GateCore(env);

/**
 * After the wasm instance traps (a Rust panic aborts), its memory can no longer be trusted, and objects made by it
 * are stale: start a fresh instance from the same compiled module, as workers-rs does, and a fresh gate on it.
 * Returns whether `error` was such a trap.
 */
function recovered(error) {
  if (!(error instanceof WebAssembly.RuntimeError)) return false;
  console.error(`edgelimit: the wasm core trapped (${error.message}); re-initialised it`);
  resetWasmState();
  gate = new GateCore(env);
  return true;
}

/**
 * The rule for this request and the verdict of the rule that enforces: the rule itself, or for a dry run the first
 * matching rule after it that is none (`enforcing`, undefined when there is none); once more on a fresh core after a
 * trap.
 */
async function judged(request, url) {
  const attempt = async () => {
    const route = gate.route(request.method, url.hostname, url.pathname + url.search, request.headers);
    if (route === undefined) return { route };
    const enforcing = route.dryRun ? route.next : route;
    return { route, enforcing, verdict: enforcing && (await enforcing.decide()) };
  };
  try {
    return await attempt();
  } catch (error) {
    if (!recovered(error)) throw error;
    return await attempt();
  }
}

/** The same request, sent to the origin: method, headers and body (streamed, not buffered) unchanged. */
function toOrigin(request, url) {
  const target = new URL(origin);
  target.pathname = originPath + url.pathname;
  target.search = url.search;
  return fetch(new Request(target, request));
}

/** The origin's response with the RateLimit fields added; its body streams through untouched. */
async function proxied(request, url, fields) {
  const response = await toOrigin(request, url);
  // A 101 (WebSocket upgrade) cannot be rebuilt, and without fields there is nothing to add.
  if (fields.length === 0 || response.status === 101) return response;
  const withFields = new Response(response.body, response);
  for (const [name, value] of fields) withFields.headers.set(name, value);
  return withFields;
}

function refusal(verdict) {
  const headers = new Headers(verdict.headers);
  headers.set("content-type", "application/problem+json");
  headers.set("cache-control", "no-store");
  return new Response(verdict.body, { status: verdict.status, headers });
}

/**
 * Logs what an operator needs to know: a dry run's would-be refusals, every unavailability of the store a rule's
 * onError decided for, and every other error (answered 500, never let through: see the README's "Errors"). A
 * read-only Redis is absorbed like an outage, but it is also a health warning: if it lasts, the endpoint reaches a
 * replica, and only an operator ends that.
 */
function report(route, verdict) {
  // verdict.rule: a rule a method override added, when its refusal or error is what is reported.
  const entry = { rule: verdict.rule ?? route.rule, key: route.key, reason: verdict.reason, status: verdict.status };
  if (verdict.error) {
    const what = verdict.error.storeUnavailable ? "store unavailable" : "error";
    console.error(JSON.stringify({ edgelimit: what, ...entry, error: verdict.error.message, code: verdict.error.code }));
    if (verdict.error.code === "EDGELIMIT_READONLY") {
      console.warn(JSON.stringify({ edgelimit: "store health", rule: route.rule, code: verdict.error.code, action: "point the endpoint at the primary if this lasts beyond a failover" }));
    }
  }
  if (route.dryRun && !verdict.allowed) {
    console.log(JSON.stringify({ edgelimit: "dry run: would refuse", ...entry }));
  }
}

export default {
  async fetch(request, _env, ctx) {
    const url = new URL(request.url);
    const { route, enforcing, verdict } = await judged(request, url);
    if (route === undefined) return toOrigin(request, url);
    if (route.dryRun) {
      // Counting must not slow the request down: it runs after the response, kept alive by waitUntil.
      const counted = route.decide().then(
        (verdict) => report(route, verdict),
        (error) => recovered(error) || console.error(`edgelimit: dry run of rule ${route.rule} failed: ${error}`),
      );
      ctx.waitUntil(counted);
      // A rule on trial lifts no rule behind it: the first one that enforces decides the request.
      if (enforcing === undefined) return toOrigin(request, url);
    }
    report(enforcing, verdict);
    return verdict.allowed ? proxied(request, url, verdict.headers) : refusal(verdict);
  },
};
