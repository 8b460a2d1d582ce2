// The playground's entry: finds the bridge (/playground.json, from `edgelimit dev`), loads the npm package's browser
// build (the wasm core) from /pkg/, and drives one or two limiter panels with the traffic the controls describe.
import { Panel } from "./panel.js";

const MAX_IDENTIFIERS = 4;
const REFRESH_MS = 200;
const DRAW_MS = 100;

const connection = document.getElementById("connection");
const summary = document.getElementById("summary");
const traffic = document.getElementById("traffic");

function fail(message) {
  connection.textContent = message;
  connection.classList.add("failed");
}

/** The bridge to talk to: `?url=…&token=…` on the page's address, or what `edgelimit dev` serves. */
async function endpoint() {
  const params = new URLSearchParams(location.search);
  if (params.has("url")) return { url: params.get("url"), token: params.get("token") ?? "" };
  const response = await fetch("playground.json");
  if (!response.ok) throw new Error(`playground.json answered ${response.status}: open the page that edgelimit dev prints`);
  return response.json();
}

/** The identifiers in the traffic form: trimmed, distinct, at most four. */
function identifiers() {
  const names = traffic.elements.identifiers.value
    .split(",")
    .map((name) => name.trim())
    .filter(Boolean);
  return [...new Set(names)].slice(0, MAX_IDENTIFIERS);
}

function wholeField(name, low, high) {
  const value = traffic.elements[name].valueAsNumber;
  if (!Number.isInteger(value) || value < low || value > high) {
    throw new Error(`${traffic.elements[name].closest("label").textContent.trim()} must be a whole number from ${low} to ${high}`);
  }
  return value;
}

/** One line per panel: how a batch of decisions came out. */
function describe(panels, entries, what) {
  return panels
    .map((panel, i) => {
      const mine = entries.map((row) => row[i]);
      const allowed = mine.filter((e) => e.success).length;
      const denied = mine.filter((e) => e.success === false);
      const failed = mine.filter((e) => e.error).length;
      const retries = denied.map((e) => e.retryAfter);
      const [soonest, latest] = [Math.min(...retries), Math.max(...retries)];
      const retry = denied.length ? ` (retry after ${soonest === latest ? soonest : `${soonest}–${latest}`} ms)` : "";
      const failures = failed ? `, ${failed} failed: ${mine.find((e) => e.error).error}` : "";
      return `${what} → ${panel.element.querySelector(".panel-title").textContent}: ${allowed} allowed, ${denied.length} denied${retry}${failures}`;
    })
    .join(" · ");
}

async function start() {
  let Ratelimit;
  let RestClient;
  try {
    ({ Ratelimit, RestClient } = await import("/pkg/browser.js"));
  } catch (e) {
    return fail(`Could not load the wasm core from /pkg/ (${e.message}). Run scripts/dev, which builds it.`);
  }
  let bridge;
  try {
    bridge = await endpoint();
    const pong = await new RestClient(bridge.url, bridge.token).command(["PING"]);
    if (pong !== "PONG") throw new Error(`PING answered ${JSON.stringify(pong)}`);
  } catch (e) {
    return fail(`Cannot reach the bridge: ${e.message}${e.code ? ` (${e.code})` : ""}. Is edgelimit dev running?`);
  }
  connection.textContent = `Connected: the wasm core in this page decides through the bridge at ${bridge.url}; state is read from its Redis.`;
  connection.dataset.ready = "true";

  const template = document.getElementById("panel-template");
  const container = document.getElementById("panels");
  const make = (letter, title, defaults) => {
    container.append(template.content.cloneNode(true));
    return new Panel(container.lastElementChild, letter, title, defaults, { Ratelimit, endpoint: bridge });
  };
  const panelA = make("a", "Limiter A", { algorithm: "sliding_log", limit: 10, interval: "1 s", rate: 10 });
  const panelB = make("b", "Limiter B", { algorithm: "fixed_window", limit: 10, interval: "1 s", rate: 10 });
  panelB.element.hidden = true;
  const active = () => [panelA, panelB].filter((panel) => !panel.element.hidden);

  const watch = () => {
    for (const panel of [panelA, panelB]) panel.identifiers = identifiers();
  };
  watch();
  await Promise.all([panelA.configure(), panelB.configure()]);

  /** Sends `count` requests at once, to the identifiers in turn, through every active panel. */
  async function fire(count, what) {
    const names = identifiers();
    if (!names.length) throw new Error("give at least one identifier");
    const permits = wholeField("permits", 1, 1_000_000);
    const panels = active();
    const entries = await Promise.all(
      Array.from({ length: count }, (_, i) => Promise.all(panels.map((panel) => panel.send(names[i % names.length], permits)))),
    );
    await Promise.all(panels.map((panel) => panel.refresh()));
    summary.textContent = describe(panels, entries, what);
  }

  let stream = null;
  const streamButton = traffic.querySelector('[data-action="stream"]');
  function stopStream() {
    clearInterval(stream?.timer);
    stream = null;
    streamButton.textContent = "Start stream";
  }
  function startStream() {
    const rate = traffic.elements["stream-rate"].valueAsNumber;
    if (!(rate >= 0.1 && rate <= 200)) throw new Error("the stream's rate must be from 0.1 to 200 per second");
    const permits = wholeField("permits", 1, 1_000_000);
    // A late tick sends what is due, so the rate holds on average, but at most a second's worth: a throttled
    // background tab must not flood the bridge when it wakes.
    const begun = performance.now();
    let sent = 0;
    stream = {
      timer: setInterval(() => {
        const names = identifiers();
        const due = Math.floor(((performance.now() - begun) * rate) / 1000) + 1;
        sent = Math.max(sent, due - Math.ceil(rate));
        for (; sent < due && names.length; sent++) {
          for (const panel of active()) panel.send(names[sent % names.length], permits);
        }
      }, Math.min(100, 1000 / rate)),
    };
    streamButton.textContent = "Stop stream";
  }

  const actions = {
    single: () => fire(1, "One request"),
    burst: () => {
      const size = wholeField("burst", 1, 1000);
      return fire(size, `Burst of ${size}`);
    },
    stream: () => (stream ? stopStream() : startStream()),
    reset: async () => {
      await Promise.all([panelA, panelB].map((panel) => panel.resetState()));
      await Promise.all([panelA, panelB].map((panel) => panel.refresh()));
      summary.textContent = "State reset: every identifier's keys were deleted.";
    },
  };
  traffic.addEventListener("click", async (event) => {
    const action = event.target.closest("button")?.dataset.action;
    if (!action) return;
    try {
      await actions[action]();
    } catch (e) {
      summary.textContent = `Not sent: ${e.message}`;
    }
  });
  traffic.addEventListener("submit", (event) => event.preventDefault());
  traffic.elements.identifiers.addEventListener("change", watch);
  traffic.elements["side-by-side"].addEventListener("change", (event) => {
    panelB.element.hidden = !event.target.checked;
  });

  // Read the state from Redis a few times a second; draw every frame in between, with the server clock moved on.
  (async function poll() {
    try {
      if (!document.hidden) await Promise.all(active().map((panel) => panel.refresh()));
    } finally {
      setTimeout(poll, REFRESH_MS);
    }
  })();
  // Ten pictures a second move smoothly enough, and spare the CPU and screen readers a rebuild every frame.
  let drawn = 0;
  (function frame(time) {
    requestAnimationFrame(frame);
    if (time - drawn < DRAW_MS) return;
    drawn = time;
    for (const panel of active()) panel.draw();
  })(0);
  document.body.dataset.ready = "true";
}

start();
