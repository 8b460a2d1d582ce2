// js/index.d.ts is written by hand, so this test holds it to what the package really returns: every object the API hands out, made by real calls against
// real Redis behind the real bridge, has exactly the fields its declared type names (no undeclared field, no
// required field missing, each of the declared JS type), and the ErrorCode union lists exactly the codes the Rust
// core can give (src/error.rs).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { Ratelimit } from "edgelimit";
import { ROOT, freePort, startStack } from "./harness.mjs";

const DECLARATIONS = readFileSync(join(ROOT, "js/index.d.ts"), "utf8");

/**
 * The members of `{ … }` text one level deep: name → { optional, type }. Doc comments are dropped first; nested
 * braces (object types inside a member) are skipped over.
 */
function members(body) {
  const text = body.replace(/\/\*\*[\s\S]*?\*\//g, "");
  const found = new Map();
  let depth = 0;
  let current = "";
  for (const char of `${text};`) {
    if (char === "{" || char === "(" || char === "<") depth++;
    if (char === "}" || char === ")" || char === ">") depth--;
    if ((char === ";" || char === "\n") && depth === 0) {
      const field = current.trim().match(/^(\w+)(\?)?:\s*([\s\S]+)$/);
      const method = current.trim().match(/^(?:static )?(\w+)\(/);
      if (field) found.set(field[1], { optional: Boolean(field[2]), type: field[3].trim() });
      else if (method && method[1] !== "constructor") found.set(method[1], { method: true });
      current = "";
    } else {
      current += char;
    }
  }
  return found;
}

/** The members of `export interface name … { … }` (or `export declare class`), with those of what it extends. */
function declared(name) {
  const start = DECLARATIONS.search(new RegExp(`export (?:interface|declare class) ${name}\\b`));
  assert.ok(start >= 0, `index.d.ts declares ${name}`);
  const header = DECLARATIONS.slice(start, DECLARATIONS.indexOf("{", start));
  const open = start + header.length;
  let depth = 0;
  let end = open;
  for (; end < DECLARATIONS.length; end++) {
    if (DECLARATIONS[end] === "{") depth++;
    if (DECLARATIONS[end] === "}" && --depth === 0) break;
  }
  const own = members(DECLARATIONS.slice(open + 1, end));
  const parents = header.match(/extends ([\w, ]+)/)?.[1].split(",").map((parent) => parent.trim()) ?? [];
  const inherited = parents.filter((parent) => parent !== "Error").flatMap((parent) => [...declared(parent)]);
  return new Map([...inherited, ...own]);
}

/** Whether `value` is of the declared TypeScript `type` (the shapes index.d.ts uses). */
function ofType(value, type) {
  return type.split("|").some((alternative) => {
    const t = alternative.trim();
    if (t === "number") return typeof value === "number" && Number.isFinite(value);
    if (t === "string") return typeof value === "string";
    if (t === "boolean") return typeof value === "boolean";
    if (t === "null") return value === null;
    if (/^".*"$/.test(t)) return value === JSON.parse(t);
    if (t.endsWith("[]")) return Array.isArray(value);
    const alias = DECLARATIONS.match(new RegExp(`export type ${t} =([^;]+);`));
    if (alias) return ofType(value, alias[1]);
    return typeof value === "object" && value !== null; // a named interface: checked on its own
  });
}

/** `object` has exactly the fields of `fields` (a members() map): none undeclared, none required missing. */
function conforms(object, fields, what) {
  for (const [key, value] of Object.entries(object)) {
    // Functions are methods (checked below); __wbg_ptr is wasm-bindgen's own handle on Rust memory.
    if (value === undefined || typeof value === "function" || key === "__wbg_ptr") continue;
    assert.ok(fields.has(key), `${what}: field ${key} is not declared in index.d.ts`);
    assert.ok(ofType(value, fields.get(key).type), `${what}.${key} = ${JSON.stringify(value)}: not ${fields.get(key).type}`);
  }
  for (const [key, { optional, method }] of fields) {
    if (method) assert.equal(typeof object[key], "function", `${what}: declared method ${key} is missing`);
    else if (!optional) assert.ok(object[key] !== undefined, `${what}: declared field ${key} is missing`);
  }
}

/** The members of one alternative of the LimitState union, by its algorithm. */
function stateAlternative(algorithm) {
  const union = DECLARATIONS.slice(DECLARATIONS.indexOf("export type LimitState ="));
  const at = union.search(new RegExp(`algorithm: [^;]*"${algorithm}"`));
  assert.ok(at >= 0, `LimitState has a ${algorithm} alternative`);
  const open = union.lastIndexOf("{", at);
  return members(union.slice(open + 1, union.indexOf("}", at)));
}

let stack;
before(async () => (stack = await startStack()));
after(() => stack.stop());

const limiters = {
  sliding_log: Ratelimit.slidingLog(2, "1 m"),
  fixed_window: Ratelimit.fixedWindow(2, "1 m"),
  sliding_window: Ratelimit.slidingWindow(2, "1 m"),
  token_bucket: Ratelimit.tokenBucket(1, "1 m", 2),
  gcra: Ratelimit.gcra(2, "1 m"),
  concurrency: Ratelimit.concurrency(2, "1 m"),
};

test("every object the API returns has exactly the fields index.d.ts declares", async () => {
  for (const [algorithm, limiter] of Object.entries(limiters)) {
    const ratelimit = new Ratelimit({ url: stack.url, token: stack.token, prefix: `types-${algorithm}`, limiter });
    const granted = await ratelimit.limit("id");
    await ratelimit.limit("id");
    const denied = await ratelimit.limit("id");
    const cached = await ratelimit.limit("id");
    // A concurrency denial is not cached: a holder may give its lease back any moment.
    const again = algorithm === "concurrency" ? "decided" : "cache";
    assert.deepEqual([granted.success, denied.success, cached.reason], [true, false, again]);
    for (const [response, what] of [[granted, "granted"], [denied, "denied"], [cached, "cached"]]) {
      conforms(response, declared("RatelimitResponse"), `${algorithm} ${what}`);
      response.results.forEach((result) => conforms(result, declared("Decision"), `${algorithm} ${what} result`));
    }
    const refund = await ratelimit.refund("id", granted.receipt);
    conforms(refund, declared("RefundResult"), `${algorithm} refund`);
    refund.results.forEach((result) => conforms(result, declared("Decision"), `${algorithm} refund result`));
    const [state] = await ratelimit.state("id");
    const fields = new Map([...declared("LimitStateBase"), ...stateAlternative(algorithm)]);
    conforms(state, fields, `${algorithm} state`);
    for (const grant of state.grants ?? []) conforms(grant, declared("HeldGrant"), `${algorithm} held grant`);
  }
  // The class's declared methods, static and on instances.
  const methods = [...declared("Ratelimit")].filter(([, member]) => member.method).map(([name]) => name);
  assert.ok(methods.length > 5, "found Ratelimit's methods");
  for (const name of methods) {
    const found = typeof Ratelimit[name] === "function" || typeof Ratelimit.prototype[name] === "function";
    assert.ok(found, `Ratelimit.${name} is declared but not there`);
  }
  // Several limits: the response, and each limit's decision.
  const several = new Ratelimit({
    url: stack.url,
    token: stack.token,
    prefix: "types-several",
    limiter: [limiters.fixed_window, limiters.gcra],
  });
  const response = await several.limit("id");
  conforms(response, declared("RatelimitResponse"), "several");
  response.results.forEach((result) => conforms(result, declared("Decision"), "several result"));
  // A failure absorbed by onError (nothing listens on a port just freed; port 9 is one fetch refuses, a local error),
  // and one thrown.
  const down = new Ratelimit({ url: `http://127.0.0.1:${await freePort()}`, token: "t", limiter: limiters.gcra, onError: "deny" });
  const absorbed = await down.limit("id");
  conforms(absorbed, declared("RatelimitResponse"), "absorbed");
  const thrown = await several.limit("id", { permits: 3 }).catch((error) => error);
  conforms(thrown, declared("EdgelimitError"), "error");
  // The Redisson-style handle.
  const handle = several.rateLimiter("types-redisson");
  conforms(handle, declared("RateLimiter"), "the Redisson-style handle");
  await handle.trySetRate(2, "1 m");
  conforms(await handle.getConfig(), declared("RateConfig"), "rate config");
  conforms(await handle.tryAcquire(), declared("Decision"), "tryAcquire");
});

test("ErrorCode lists exactly the codes the core gives", () => {
  const union = DECLARATIONS.slice(DECLARATIONS.indexOf("export type ErrorCode ="));
  const declaredCodes = new Set(union.slice(0, union.indexOf(";")).match(/EDGELIMIT_\w+/g));
  const source = readFileSync(join(ROOT, "src/error.rs"), "utf8");
  const codeFn = source.slice(source.indexOf("pub fn code(&self)"));
  const rustCodes = new Set(codeFn.slice(0, codeFn.indexOf("\n    }\n")).match(/EDGELIMIT_\w+/g));
  assert.ok(rustCodes.size > 10, "found the codes in src/error.rs");
  assert.deepEqual([...declaredCodes].sort(), [...rustCodes].sort());
});
