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
 * `timeoutMs`; outside a browser `deadlineHeader` carries the timeout to the bridge. Resolves to `[status, body
 * text]`; rejects with `{kind, message}` (see `failure`).
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
  } catch (error) {
    throw failure(error, controller.signal.aborted);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Why a request got no reply, for src/rest/http_wasm.rs: `kind` "timeout" (our deadline aborted it), "network" (an
 * error the runtime gives only for the network: the store is unreachable) or "local" (anything else: fetch refused
 * the request in this process, so nothing says the store is down), and a `message`.
 */
function failure(error, aborted) {
  const name = error instanceof Error ? error.name : undefined;
  if (aborted && (name === "AbortError" || name === "TimeoutError")) return { __proto__: null, kind: "timeout", message: "" };
  return { __proto__: null, kind: networkError(error) ? "network" : "local", message: described(error) };
}

// A browser's TypeError for any network failure (it says no more, CORS refusals included): Chromium's (measured),
// Firefox's and Safari's.
const BROWSER_NETWORK_MESSAGES = new Set(["Failed to fetch", "NetworkError when attempting to fetch resource.", "Load failed"]);

/**
 * Whether `error` is how this runtime reports a failure of the network. Node (undici): a TypeError "fetch failed"
 * ("terminated" when the body's read fails) whose cause is the socket's error. Deno (2.9, measured): "fetch failed"
 * whose cause is its HTTP client's "error sending request …", or "error reading a body from connection". Browsers: a
 * TypeError of a fixed message. workerd: an Error "Network connection lost.". A TypeError of another message is fetch
 * refusing the call.
 */
function networkError(error) {
  if (!(error instanceof Error)) return false;
  const message = own(error, "message");
  if (error instanceof TypeError) {
    if (message === "fetch failed" || message === "terminated") return networkCause(own(error, "cause"));
    return BROWSER_NETWORK_MESSAGES.has(message) || message === "error reading a body from connection";
  }
  return message === "Network connection lost.";
}

// Node's codes for a socket that could not connect, or failed or timed out once connected.
const NETWORK_CODES = new Set([
  "ECONNREFUSED", "ECONNRESET", "ECONNABORTED", "ENOTFOUND", "EAI_AGAIN", "ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH",
  "ENETDOWN", "EHOSTDOWN", "EPIPE", "EPROTO", "UND_ERR_SOCKET", "UND_ERR_CONNECT_TIMEOUT", "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
]);

/**
 * Whether the cause of "fetch failed" is a network error: Deno's, or in Node a socket's code, TLS (OpenSSL's codes),
 * an HTTP reply undici could not parse (HPE_*, as the native client's transport error), or an AggregateError of such
 * (several addresses tried).
 * Codes are read as own properties only, so a polluted prototype cannot pass a local error off as one.
 */
function networkCause(cause) {
  if (!(cause instanceof Error)) return false;
  if (String(own(cause, "message")).startsWith("error sending request ")) return true;
  const code = own(cause, "code");
  if (typeof code === "string" && (NETWORK_CODES.has(code) || /^(ERR_SSL_|ERR_TLS_|HPE_)|CERT|UNABLE_TO_VERIFY/.test(code))) {
    return true;
  }
  const errors = own(cause, "errors");
  return Array.isArray(errors) && errors.length > 0 && errors.every(networkCause);
}

/** `error`'s message and its cause's (Node's fetch says only "fetch failed"; the reason is in its cause). */
function described(error) {
  const text = (value) => {
    try {
      const message = value instanceof Error ? own(value, "message") : undefined;
      return typeof message === "string" ? message : String(value);
    } catch {
      return "an error String() cannot print";
    }
  };
  const cause = error instanceof Error ? own(error, "cause") : undefined;
  return cause === undefined ? text(error) : `${text(error)}: ${text(cause)}`;
}

function own(object, name) {
  return Object.hasOwn(object, name) ? object[name] : undefined;
}
