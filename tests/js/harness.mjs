// Test harness for the JS tests: a real redis-server and the real `edgelimit bridge` binary, each on a free
// loopback port, stopped when the test ends. No test depends on a service it did not start.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createConnection, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Redis } from "@upstash/redis";

export const ROOT = fileURLToPath(new URL("../..", import.meta.url));
export const TOKEN = "js-test-token";
/** A `limiter` token every harness bridge accepts too (what a deployed Worker holds): edgelimit's scripts only. */
export const LIMITER_TOKEN = "js-limiter-token";
const EDGELIMIT_BIN = process.env.EDGELIMIT_BIN ?? join(ROOT, "target/debug/edgelimit");

/** A loopback port that was free a moment ago. */
export async function freePort() {
  const server = createServer().listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address();
  server.close();
  await once(server, "close");
  return port;
}

/** Whether a Redis answers PING on `port` now. */
export function ping(port) {
  return new Promise((resolve) => {
    const socket = createConnection({ port, host: "127.0.0.1" }, () => socket.write("PING\r\n"));
    socket.on("data", (data) => {
      socket.destroy();
      resolve(data.toString() === "+PONG\r\n");
    });
    socket.on("error", () => resolve(false));
  });
}

/** Resolves once `check()` is true, polling every 20 ms; throws after `timeoutMs`. */
export async function waitFor(what, check, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`${what} did not become ready within ${timeoutMs} ms`);
}

/**
 * An endpoint that accepts connections and never answers: a store that hangs. `stop()` closes it and its sockets.
 */
export async function startStalledEndpoint() {
  const sockets = new Set();
  const server = createServer((socket) => sockets.add(socket)).listen(0, "127.0.0.1");
  await once(server, "listening");
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    stop() {
      sockets.forEach((socket) => socket.destroy());
      server.close();
    },
  };
}

/** Starts redis-server on `port` (nothing on disk). */
export async function startRedis(port) {
  const dir = mkdtempSync(join(tmpdir(), "edgelimit-js-redis-"));
  const child = spawn(
    "redis-server",
    ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir],
    { stdio: ["ignore", "ignore", "inherit"] },
  );
  child.on("error", (e) => console.error(`redis-server failed to start (${e.message}); run scripts/setup`));
  await waitFor(`redis-server on port ${port}`, () => ping(port));
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    async stop() {
      if (child.exitCode === null) {
        child.kill("SIGKILL");
        await once(child, "exit");
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Runs the `edgelimit` binary with `args` (and `EDGELIMIT_TOKEN=token`, from `cwd`) until `announced(stdout so far)`
 * returns what it printed that the test needs; resolves to that, with `stop()`: SIGTERM, then wait for the exit.
 */
export async function runEdgelimit(args, { token, cwd }, announced) {
  if (!existsSync(EDGELIMIT_BIN)) {
    throw new Error(`${EDGELIMIT_BIN} is missing: build it with 'cargo build -p edgelimit-cli' (scripts/test does)`);
  }
  const child = spawn(EDGELIMIT_BIN, args, {
    cwd,
    env: { ...process.env, EDGELIMIT_TOKEN: token },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const printed = await new Promise((resolve, reject) => {
    let seen = "";
    child.stdout.on("data", (chunk) => {
      seen += chunk;
      const found = announced(seen);
      if (found) resolve(found);
    });
    child.on("exit", (code) => reject(new Error(`edgelimit ${args[0]} exited with ${code} before it was up:\n${seen}`)));
  });
  return {
    ...printed,
    async stop() {
      if (child.exitCode === null) {
        child.kill("SIGTERM");
        await once(child, "exit");
      }
    },
  };
}

/**
 * Starts `edgelimit bridge` in front of `redisUrl` with `token` as its admin token and LIMITER_TOKEN as a limiter
 * token (from a tokens file); resolves once it prints its address.
 */
export async function startBridge(redisUrl, token = TOKEN) {
  const dir = mkdtempSync(join(tmpdir(), "edgelimit-tokens-"));
  writeFileSync(join(dir, "tokens"), `limiter:${LIMITER_TOKEN}\n`);
  const args = ["bridge", "--listen", "127.0.0.1:0", "--redis", redisUrl, "--redis-timeout-ms", "1500"];
  args.push("--tokens-file", join(dir, "tokens"));
  const bridge = await runEdgelimit(args, { token }, (seen) => {
    const match = seen.match(/listening on (http:\/\/[\d.:]+)/);
    return match && { url: match[1] };
  });
  return {
    ...bridge,
    async stop() {
      await bridge.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Redis + bridge; `stopRedis`/`restartRedis` act under a running bridge. */
export async function startStack() {
  let redis = await startRedis(await freePort());
  const bridge = await startBridge(redis.url);
  return {
    url: bridge.url,
    token: TOKEN,
    limiterToken: LIMITER_TOKEN,
    stopRedis: () => redis.stop(),
    async restartRedis() {
      redis = await startRedis(redis.port);
    },
    async stop() {
      await bridge.stop();
      await redis.stop();
    },
  };
}

/** An unmodified `@upstash/redis` client for `stack`, without telemetry; `options` override its settings. */
export function upstashRedis(stack, options = {}) {
  return new Redis({ url: stack.url, token: stack.token, enableTelemetry: false, ...options });
}

/**
 * Every file of the built package as Miniflare modules under `<ROOT>/edgelimit/`, the .wasm as a compiled module
 * (as wrangler bundles it), so a Worker imports "./edgelimit/workerd.js".
 */
export function packageModules() {
  const pkg = join(ROOT, "pkg");
  // Recursive: wasm-bindgen puts the JS files the core imports under snippets/.
  return readdirSync(pkg, { recursive: true })
    .filter((file) => file.endsWith(".js") || file.endsWith(".wasm"))
    .map((file) => ({
      type: file.endsWith(".wasm") ? "CompiledWasm" : "ESModule",
      path: join(ROOT, "edgelimit", file),
      contents: readFileSync(join(pkg, file)),
    }));
}

/** An array whose `name` property throws when read, as a Proxy's trap may. */
export function throwingArray(items, name) {
  return new Proxy(items, { get: (target, key) => (key === name ? thrower(name) : target[key]) });
}

/** A revoked Proxy of an array: `Array.isArray` itself throws on it. */
export function revokedArray() {
  const { proxy, revoke } = Proxy.revocable([], {});
  revoke();
  return proxy;
}

function thrower(name) {
  throw new Error(`boom reading ${name}`);
}
