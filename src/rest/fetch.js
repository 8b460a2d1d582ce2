// One REST request through the runtime's global `fetch` (Workers, Node, browsers), for src/rest/http_wasm.rs: one
// call into JS per request. A timer cleared when the body is in, not `AbortSignal.timeout`, whose timer stays armed
// after the response (about a tenth of the client's CPU per decision in Node).

// In a browser a header of our own needs a CORS preflight's approval, so the deadline header is left out there. A
// page has a `document`; a browser's Web Worker has none, but its user agent begins with "Mozilla/".
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

/** POSTs `body` (JSON) to `url`, asking for base64 replies, for at most `timeoutMs`; `[status, text]` or `failure`. */
export async function post(url, authorization, body, timeoutMs, deadlineHeader) {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), timeoutMs);
  try {
    // Objects without a prototype: fetch reads only the fields set here, whatever the host put on Object.prototype.
    const headers = { __proto__: null, authorization, "upstash-encoding": "base64", "content-type": "application/json" };
    if (!inABrowser) headers[deadlineHeader] = String(timeoutMs);
    // A redirect is never followed (whatever answered elsewhere would be read as the store's decision): "manual"
    // hands back the 30x, which src/rest/mod.rs reports; "error" would reject like an unreachable endpoint.
    const init = { __proto__: null, method: "POST", headers, body, signal: controller.signal, redirect: "manual" };
    const response = await fetch(url, init);
    return [response.status, await response.text()];
  } catch (error) {
    throw failure(error, controller.signal.aborted);
  } finally {
    clearTimeout(timer);
  }
}

/** Why a request got no reply: `kind` "timeout" (our deadline), "network" (the store is unreachable) or "local". */
function failure(error, aborted) {
  const name = error instanceof Error ? error.name : undefined;
  if (aborted && (name === "AbortError" || name === "TimeoutError")) return { __proto__: null, kind: "timeout", message: "" };
  return { __proto__: null, kind: networkError(error) ? "network" : "local", message: described(error) };
}

// A browser's TypeError for any network failure: Chromium's, Firefox's and Safari's.
const BROWSER_NETWORK_MESSAGES = new Set(["Failed to fetch", "NetworkError when attempting to fetch resource.", "Load failed"]);

/**
 * Whether `error` is how this runtime reports a failure of the network: Node's and Deno's "fetch failed" (or
 * "terminated") with a network cause, Deno's body error, a browser's fixed TypeError, workerd's "Network connection
 * lost.". A TypeError of another message is fetch refusing the call.
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
 * Whether the cause of "fetch failed" is a network error: Deno's, or Node's socket, TLS or HTTP parser code, or an
 * AggregateError of such. Own properties only, so a polluted prototype cannot pass a local error off as one.
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
