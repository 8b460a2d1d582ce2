// One REST request through the runtime's global `fetch` (Workers, Node, browsers), for src/rest/http_wasm.rs.
//
// Why here and not from Rust, property by property: a request is one call into JS instead of a dozen (each
// `Reflect.set` decodes its name from wasm memory), and its headers are one object literal.
//
// Why an AbortController and a timer cleared when the body is in, not `AbortSignal.timeout`: that signal's timer
// stays armed after the response, so every request's timer fires later anyway, builds a DOMException and dispatches
// an abort event nobody waits for. In Node (bench/coalescing.mjs, 8 in flight) that was about a tenth of the client's
// CPU per decision.

// In a browser, a header of our own needs a CORS preflight's approval, which an endpoint may not give (then every
// request fails, and a fail-open policy admits it): there the deadline header is left out (see DEADLINE_HEADER in
// src/rest/mod.rs). A page has a `document`; a browser's Web Worker has none, but its user agent, like a page's,
// begins with "Mozilla/" (Node's is "Node.js/…", Cloudflare Workers' "Cloudflare-Workers", Deno's "Deno/…").
const inABrowser =
  typeof document !== "undefined" ||
  (typeof navigator === "object" && navigator !== null && /^Mozilla\//.test(String(navigator.userAgent)));

/** Why `url` is not a URL `fetch` can send to, or `undefined` when it is one (read by the runtime's own `URL`). */
export function urlProblem(url) {
  try {
    new URL(url);
    return undefined;
  } catch (error) {
    return String(error?.message ?? error);
  }
}

/** Whether `url` (one `urlProblem` accepts) names a user or password, which `fetch` refuses to send to. */
export function urlHasCredentials(url) {
  const parsed = new URL(url);
  return parsed.username !== "" || parsed.password !== "";
}

/**
 * POSTs `body` (JSON) to `url` with the `authorization` header, asking for base64-encoded replies, and gives up after
 * `timeoutMs` (the fetch then rejects with an AbortError); outside a browser `deadlineHeader` carries the timeout to
 * the bridge. Resolves to `[status, body text]`.
 */
export async function post(url, authorization, body, timeoutMs, deadlineHeader) {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), timeoutMs);
  try {
    // Objects without a prototype: fetch reads only the fields set here, whatever the host put on Object.prototype.
    const headers = { __proto__: null, authorization, "upstash-encoding": "base64", "content-type": "application/json" };
    if (!inABrowser) headers[deadlineHeader] = String(timeoutMs);
    // A redirect is never followed: followed, the call would go elsewhere (as a GET, without the token) and whatever
    // answered there would be read as the store's decision. "manual" hands back the 30x (in a browser an opaque
    // response of status 0), which src/rest/mod.rs reports; "error" would reject like an unreachable endpoint, which
    // a fail-open policy absorbs.
    const init = { __proto__: null, method: "POST", headers, body, signal: controller.signal, redirect: "manual" };
    const response = await fetch(url, init);
    return [response.status, await response.text()];
  } finally {
    clearTimeout(timer);
  }
}
