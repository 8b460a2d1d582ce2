// Harness for the playground's browser tests: the real main command (`edgelimit dev`, without the Worker) on free
// ports, and Debian's real Chromium driven by playwright-core, each page watched for console errors.
import { execFileSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { ROOT, freePort, runEdgelimit } from "./harness.mjs";

export const ARTIFACTS = join(ROOT, "test-artifacts");
export const DEV_TOKEN = "playground-test-token";

/**
 * Runs `edgelimit dev --no-worker` from the checkout, as a user would (it serves www/ and pkg/); resolves once it
 * prints the bridge's and the playground's URLs. `stop()` sends SIGTERM and waits for it to shut down.
 */
export async function startDevStack() {
  const args = ["dev", "--no-worker", "--listen", "127.0.0.1:0", "--redis-port", String(await freePort()), "--playground-port", "0"];
  const stack = await runEdgelimit(args, { token: DEV_TOKEN, cwd: ROOT }, (seen) => {
    const bridge = seen.match(/bridge +(http:\/\/[\d.:]+)/);
    const playground = seen.match(/playground +(http:\/\/[\d.:]+\/)/);
    return bridge && playground && { bridge: bridge[1], playground: playground[1] };
  });
  return { ...stack, token: DEV_TOKEN };
}

/** Debian's Chromium (the machine's; playwright cannot download its own here). */
function chromiumPath() {
  if (process.env.CHROMIUM) return process.env.CHROMIUM;
  try {
    return execFileSync("sh", ["-c", "command -v chromium"], { encoding: "utf8" }).trim();
  } catch {
    throw new Error("chromium is not installed: run scripts/setup (it installs Debian's chromium)");
  }
}

/**
 * Launches headless Chromium with a fresh profile, and without the background networking that this machine's
 * closed network would refuse.
 */
export function launchChromium() {
  return chromium.launch({
    executablePath: chromiumPath(),
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}

/**
 * Opens the playground in a new page and waits until it is connected. `errors` collects every console error and
 * uncaught exception the page has, for the test to assert there were none.
 */
export async function openPlayground(browser, url, viewport = { width: 1400, height: 1000 }) {
  const page = await browser.newPage({ viewport });
  const errors = [];
  page.on("console", (message) => {
    if (message.type() === "error") errors.push(`console: ${message.text()} (${message.location().url})`);
  });
  page.on("pageerror", (error) => errors.push(`uncaught: ${error.message}`));
  await page.goto(url);
  await page.waitForSelector("body[data-ready=true]", { timeout: 15_000 });
  return { page, errors };
}

/** Saves a screenshot of `page` as test-artifacts/<name>.png (kept by CI as the test's artifact). */
export async function screenshot(page, name) {
  mkdirSync(ARTIFACTS, { recursive: true });
  const path = join(ARTIFACTS, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}
