// The playground in real Chromium, served by the real main command (`edgelimit dev`): the page loads without console
// errors, bursts come out as the limit says, what it draws is what Redis holds (read back here with a plain Redis
// client), side-by-side mode shows the fixed window's boundary burst, and bad settings get a clear message.
// Screenshots land in test-artifacts/. Waits are on what the page shows, never on wall-clock bands.
import assert from "node:assert/strict";
import { after, afterEach, before, test } from "node:test";
import { launchChromium, openPlayground, screenshot, startDevStack } from "./browser-harness.mjs";
import { upstashRedis } from "./harness.mjs";

let dev;
let browser;
let redis;
let opened = [];

before(async () => {
  dev = await startDevStack();
  browser = await launchChromium();
  redis = upstashRedis({ url: dev.bridge, token: dev.token }, { automaticDeserialization: false });
});
after(async () => {
  await browser?.close();
  await dev?.stop();
});
afterEach(async () => {
  for (const { page } of opened) await page.close();
  opened = [];
});

/** Opens the playground; the test fails if the page logs an error at any point (checked by `noErrors`). */
async function open(viewport) {
  const opening = await openPlayground(browser, dev.playground, viewport);
  opened.push(opening);
  return opening;
}

function noErrors({ errors }) {
  assert.deepEqual(errors, [], "the page logged errors");
}

/** Sets a panel's limiter and waits until the page has applied it anew (and reset its state). */
async function configure(page, letter, { algorithm, limit, interval, rate = limit }) {
  const panel = `#panel-${letter}`;
  const before = Number((await page.getAttribute(panel, "data-generation")) ?? 0);
  const form = page.locator(`${panel} form.limiter`);
  await form.locator('[name="algorithm"]').selectOption(algorithm);
  await form.locator('[name="limit"]').fill(String(limit));
  await form.locator('[name="interval"]').fill(interval);
  if (algorithm === "token_bucket" || algorithm === "gcra") await form.locator('[name="rate"]').fill(String(rate));
  await form.locator('[name="interval"]').dispatchEvent("change");
  await page.waitForFunction(
    ({ panel, applied, before }) => {
      const element = document.querySelector(panel);
      return element.dataset.applied === applied && Number(element.dataset.generation) > before;
    },
    { panel, applied: `${algorithm} ${limit} ${interval} ${rate}`, before },
  );
}

/** Sets the traffic form's fields. */
async function traffic(page, fields) {
  for (const [name, value] of Object.entries(fields)) {
    await page.locator(`#traffic [name="${name}"]`).fill(String(value));
  }
  await page.locator('#traffic [name="identifiers"]').dispatchEvent("change");
}

async function burst(page, size) {
  await traffic(page, { burst: size });
  await page.evaluate(() => (document.getElementById("summary").textContent = ""));
  await page.click('[data-action="burst"]');
  await page.waitForFunction(() => document.getElementById("summary").textContent.startsWith("Burst of"));
}

async function tally(page, letter) {
  const data = await page.locator(`#panel-${letter} .tally`).evaluate((p) => ({ ...p.dataset }));
  return { allowed: Number(data.allowed), denied: Number(data.denied), failed: Number(data.failed) };
}

/**
 * The state view's data for `identifier` in a panel, once `ready(data, arg)` holds. `ready` runs in the page, so it
 * sees nothing of the test's scope but `arg`.
 */
async function stateOf(page, letter, identifier, ready = () => true, arg = null) {
  const selector = `#panel-${letter} .identifier-state[data-identifier="${identifier}"]`;
  const handle = await page.waitForFunction(
    ({ selector, ready, arg }) => {
      const view = document.querySelector(selector);
      if (!view) return null;
      const data = { ...view.dataset };
      return new Function("data", "arg", `return (${ready})(data, arg)`)(data, arg) ? data : null;
    },
    { selector, ready: ready.toString(), arg },
    { timeout: 10_000 },
  );
  return handle.jsonValue();
}

test("the page loads in Chromium without console errors, connected to the dev bridge, and accessible", async () => {
  const opening = await open();
  const { page } = opening;
  assert.match(await page.textContent("#connection"), new RegExp(`bridge at ${dev.bridge}`));
  const state = await stateOf(page, "a", "alice");
  assert.deepEqual([state.algorithm, state.held, state.key], ["sliding_log", "0", "playground:{a-sliding_log}:alice"]);
  // Every control is labelled, every picture has a text alternative, and the panel's pictures say what they show.
  const unlabelled = await page.$$eval("input, select", (fields) =>
    fields.filter((field) => field.labels.length === 0 && !field.getAttribute("aria-label")).map((field) => field.name),
  );
  assert.deepEqual(unlabelled, []);
  const pictures = await page.$$eval("#panel-a svg", (svgs) => svgs.map((svg) => [svg.getAttribute("role"), svg.getAttribute("aria-label")]));
  assert.ok(pictures.length >= 2);
  for (const [role, label] of pictures) assert.ok(role === "img" && label.length > 10, `${role}: ${label}`);
  assert.equal(await page.locator("#panel-b").isHidden(), true, "one panel until side by side is asked for");
  // Narrow screens: nothing wider than the viewport.
  await page.setViewportSize({ width: 380, height: 900 });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `the page is ${overflow}px wider than a 380px screen`);
  noErrors(opening);
});

test("must show: a burst of 12 at a 10-per-second sliding log: 10 allowed, 2 denied with retry times; the timeline is what Redis holds, then empties", async () => {
  const opening = await open();
  const { page } = opening;
  await configure(page, "a", { algorithm: "sliding_log", limit: 10, interval: "1 s" });
  await traffic(page, { identifiers: "alice", permits: 1 });
  await burst(page, 12);
  // Read Redis at once: with a one-second window, the grants are gone a second from now.
  const key = "playground:{a-sliding_log}:alice";
  const zset = await redis.zrange(key, 0, -1, { withScores: true });

  assert.deepEqual(await tally(page, "a"), { allowed: 10, denied: 2, failed: 0 });
  const retries = await page.$$eval("#panel-a tr.denied", (rows) => rows.map((row) => Number(row.dataset.retryAfter)));
  assert.equal(retries.length, 2);
  for (const retry of retries) assert.ok(retry > 0 && retry <= 1000, `retry after ${retry} ms`);
  assert.match(await page.textContent("#summary"), /Burst of 12 → Limiter A: 10 allowed, 2 denied \(retry after \d+(–\d+)? ms\)/);

  // The timeline after the burst, compared with the zset in Redis at the moment the page read it.
  const state = await stateOf(page, "a", "alice", (data) => data.held === "10");
  assert.equal(state.key, key);
  const drawn = await page.$$eval(`#panel-a [data-identifier="alice"] [data-grant]`, (grants) =>
    grants.map((g) => ({ id: g.dataset.grant, permits: Number(g.dataset.permits), freesAt: Number(g.dataset.freesAt) })),
  );
  // One member per grant: `<position>:<permits>:<run>:<grant id>` (lua/limits/zset_log.lua).
  const held = [];
  for (let i = 0; i < zset.length; i += 2) {
    const [, permits, id] = String(zset[i]).match(/^\d{13}:(\d+):\d+:(.+)$/);
    held.push({ id, permits: Number(permits), freesAt: Number(zset[i + 1]) });
  }
  const byId = (a, b) => a.id.localeCompare(b.id);
  assert.equal(drawn.length, 10, "ten grants on the timeline");
  assert.deepEqual(drawn.toSorted(byId), held.toSorted(byId));
  for (const grant of drawn) assert.ok(grant.freesAt > Number(state.now) && grant.freesAt <= Number(state.now) + 1000);
  assert.equal(await page.locator(`#panel-a [data-identifier="alice"] [data-denial]`).count(), 2, "both denials marked");
  await screenshot(page, "playground-burst");

  // As the window moves on, every grant frees: the timeline empties, and Redis agrees.
  const empty = await stateOf(page, "a", "alice", (data) => data.held === "0");
  assert.equal(await page.locator(`#panel-a [data-identifier="alice"] [data-grant]`).count(), 0);
  assert.equal(await redis.zcount(empty.key, `(${empty.now}`, "+inf"), 0);
  noErrors(opening);
});

test("window counters, tokens and the TAT shown are what Redis holds", async () => {
  const opening = await open();
  const { page } = opening;
  await traffic(page, { identifiers: "carol", permits: 2 });
  // Each case waits until the page shows the burst's 6 permits taken.
  const cases = [
    [{ algorithm: "fixed_window", limit: 9, interval: "1 m", rate: 9 }, (data) => data.algorithm === "fixed_window" && data.count === "6"],
    [{ algorithm: "sliding_window", limit: 9, interval: "1 m", rate: 9 }, (data) => data.algorithm === "sliding_window" && data.current === "6"],
    [{ algorithm: "token_bucket", limit: 9, interval: "1 m", rate: 3 }, (data) => data.algorithm === "token_bucket" && Number(data.tokens) < 4],
    [{ algorithm: "gcra", limit: 9, interval: "1 m", rate: 3 }, (data) => data.algorithm === "gcra" && Number(data.tokens) < 4],
  ];
  for (const [settings, taken] of cases) {
    await configure(page, "a", settings);
    await burst(page, 3);
    assert.deepEqual(await tally(page, "a"), { allowed: 3, denied: 0, failed: 0 }, settings.algorithm);
    const state = await stateOf(page, "a", "carol", taken);
    const stored = await redis.get(state.key);
    // The stored value after its algorithm's tag (`fw:`, `sw:`, `tb:`, `gcra:`).
    const numbers = String(stored).split(":").slice(1).map(Number);
    const now = Number(state.now);
    const intervalMs = 60_000;
    switch (settings.algorithm) {
      case "fixed_window":
        assert.equal(Number(state.count), numbers[1]);
        assert.equal(numbers[1], 6);
        assert.equal(Number(state.windowStart), numbers[0] * intervalMs);
        break;
      case "sliding_window":
        assert.deepEqual([Number(state.current), Number(state.previous)], [numbers[1], numbers[2]]);
        assert.equal(numbers[1], 6);
        break;
      case "token_bucket": {
        // Stored as tokens × interval at a time; refilled at `rate` per interval until the moment read.
        const [units, at] = numbers;
        const tokens = Math.min(9 * intervalMs, units + (now - at) * 3) / intervalMs;
        assert.equal(Number(state.tokens), tokens);
        assert.ok(tokens >= 3 && tokens < 3.01, `9 − 6 tokens: ${tokens}`);
        break;
      }
      case "gcra": {
        const [ms, rem] = numbers;
        assert.equal(Number(state.tat), ms + rem / 3);
        const tokens = Number(state.tokens);
        assert.ok(tokens >= 3 && tokens < 3.01, `a burst of 9 − 6 left: ${tokens}`);
        break;
      }
    }
    const text = await page.textContent(`#panel-a [data-identifier="carol"] .raw`);
    assert.ok(text.includes(`${state.key} → "${stored}"`), text);
  }
  noErrors(opening);
});

test("side by side under the same traffic: the fixed window lets a boundary burst through, the sliding log does not", async () => {
  const opening = await open();
  const { page } = opening;
  await page.check('[name="side-by-side"]');
  await configure(page, "a", { algorithm: "sliding_log", limit: 5, interval: "6 s" });
  await configure(page, "b", { algorithm: "fixed_window", limit: 5, interval: "6 s" });
  await traffic(page, { identifiers: "dave", permits: 1 });
  // 5 late in a fixed window (1.5 to 3 s before it ends, by the server's clock as Redis gave it: over a second of
  // margin for a slow machine), then 5 just after it ends: 10 in under 6 s.
  const late = await stateOf(page, "b", "dave", (data) => {
    const left = Number(data.windowEnd) - Number(data.now);
    return left > 1500 && left < 3000;
  });
  await burst(page, 5);
  const next = (data, end) => Number(data.windowStart) >= end && Number(data.now) > Number(data.windowStart) + 50;
  await stateOf(page, "b", "dave", next, Number(late.windowEnd));
  await burst(page, 5);

  assert.deepEqual(await tally(page, "b"), { allowed: 10, denied: 0, failed: 0 }, "fixed window: 5 per window, 10 in a moment");
  assert.deepEqual(await tally(page, "a"), { allowed: 5, denied: 5, failed: 0 }, "sliding log: 5 in any 4 s");
  assert.match(await page.textContent("#summary"), /Limiter A: 0 allowed, 5 denied .* Limiter B: 5 allowed, 0 denied/);
  // Each panel and its log are named after their limiter (the controls repeat).
  assert.deepEqual(
    await page.$$eval(".panel", (panels) => panels.map((panel) => [panel.getAttribute("aria-labelledby"), panel.querySelector(".log-wrap").getAttribute("aria-label")])),
    [["panel-a-title", "Limiter A: decision log"], ["panel-b-title", "Limiter B: decision log"]],
  );
  await screenshot(page, "playground-side-by-side");
  noErrors(opening);
});

test("several identifiers and weighted requests; a steady stream; bad settings get a clear message and change nothing", async () => {
  const opening = await open();
  const { page } = opening;
  await configure(page, "a", { algorithm: "sliding_log", limit: 10, interval: "1 m" });
  await traffic(page, { identifiers: "erin, frank", permits: 3 });
  await burst(page, 8);
  // Each identifier got 4 requests of 3: 3 fit in 10, the 4th does not.
  assert.deepEqual(await tally(page, "a"), { allowed: 6, denied: 2, failed: 0 });
  for (const identifier of ["erin", "frank"]) {
    const state = await stateOf(page, "a", identifier, (data) => data.held === "9");
    assert.equal(await redis.zcard(state.key), 3, "one member per grant");
  }

  await traffic(page, { identifiers: "grace", permits: 1, "stream-rate": 20 });
  await page.click('[data-action="stream"]');
  await page.waitForFunction(() => Number(document.querySelector("#panel-a .tally").dataset.allowed) >= 6 + 5);
  await page.click('[data-action="stream"]');
  assert.equal(await page.textContent('[data-action="stream"]'), "Start stream");

  const form = page.locator("#panel-a form.limiter");
  await form.locator('[name="interval"]').fill("10");
  await form.locator('[name="interval"]').dispatchEvent("change");
  await page.waitForFunction(() => document.querySelector("#panel-a .config-error").textContent.length > 0);
  const message = await page.textContent("#panel-a .config-error");
  assert.match(message, /interval/);
  assert.match(message, /EDGELIMIT_INVALID_CONFIG/);
  assert.match(message, /keeps its previous limiter/);
  assert.equal(await page.getAttribute("#panel-a", "data-applied"), "sliding_log 10 1 m 10");

  await traffic(page, { permits: 0 });
  await page.click('[data-action="single"]');
  assert.match(await page.textContent("#summary"), /Not sent: Permits per request must be a whole number from 1/);
  noErrors(opening);
});
