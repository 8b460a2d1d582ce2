// edgelimit as a Cloudflare Worker in front of an origin. This shim only moves requests and responses; the wasm
// core (src/gate, src/wasm/gate.rs) decides everything else. Configuration: wrangler.toml [vars] ORIGIN,
// EDGELIMIT_URL, RULES (and EDGELIMIT_PREFIX), the secret EDGELIMIT_TOKEN (docs/worker.md).
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

// Built when the isolate starts, so a bad RULES or a missing setting stops the Worker from starting (and deploying)
// with the reason, instead of failing requests.
const origin = originOf(env.ORIGIN);
// Request paths are appended to the origin's own path, if it has one.
const originPath = origin.pathname.replace(/\/$/, "");
let gate = new GateCore(env);

/**
 * After a wasm trap (a Rust panic) the instance's memory cannot be trusted: start a fresh instance and gate, as
 * workers-rs does. Returns whether `error` was such a trap.
 */
function recovered(error) {
  if (!(error instanceof WebAssembly.RuntimeError)) return false;
  console.error(`edgelimit: the wasm core trapped (${error.message}); re-initialised it`);
  resetWasmState();
  gate = new GateCore(env);
  return true;
}

/**
 * The rule for this request and the verdict of the rule that enforces (`enforcing`: for a dry run, the next matching
 * rule that is not one, or undefined); retried once on a fresh core after a trap.
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
 * Logs what an operator needs: a dry run's would-be refusals, store unavailability (decided by the rule's onError)
 * and every other error (answered 500: docs/errors.md). A read-only Redis is also a health warning: if it lasts,
 * the endpoint reaches a replica.
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
