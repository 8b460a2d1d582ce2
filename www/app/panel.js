// One limiter panel: its settings, the npm package's Ratelimit deciding in the browser (wasm) through the bridge, the
// state read back from Redis, the chart and the decision log. Side-by-side mode is two panels under the same
// traffic.
import { drawChart } from "./chart.js";
import { observe, serverNow } from "./clock.js";
import { DecisionLog } from "./decision-log.js";
import { stateView } from "./state-view.js";

const DESCRIPTIONS = {
  sliding_log:
    "Exact: at most the limit in any interval-long span. Every grant is a zset member that frees exactly one interval after it was granted.",
  fixed_window:
    "Counts per aligned window. Cheapest, but a client can take the limit at the end of one window and again at the start of the next.",
  sliding_window:
    "Weights the previous window's count by how much of it the sliding window still covers. O(1) memory; a burst at a window's end can let nearly twice the limit through.",
  token_bucket: "A bucket of `limit` tokens, refilled continuously by `rate` per interval. Bursts up to the capacity, then the rate.",
  gcra: "The token bucket's decisions with one timestamp per key: the theoretical arrival time (TAT).",
};

/** The limiter descriptions the package's factories build, from the panel's settings. */
function limiterOf(Ratelimit, { algorithm, limit, interval, rate }) {
  switch (algorithm) {
    case "sliding_log":
      return Ratelimit.slidingLog(limit, interval);
    case "fixed_window":
      return Ratelimit.fixedWindow(limit, interval);
    case "sliding_window":
      return Ratelimit.slidingWindow(limit, interval);
    case "token_bucket":
      return Ratelimit.tokenBucket(rate, interval, limit);
    case "gcra":
      return Ratelimit.gcra(rate, interval, limit);
  }
  throw new Error(`unknown algorithm ${algorithm}`);
}

/** A number input's value: the number when it is one, else the text, so the package's own check names the problem. */
function numeric(input) {
  return input.value.trim() !== "" && Number.isFinite(input.valueAsNumber) ? input.valueAsNumber : input.value;
}

export class Panel {
  #Ratelimit;
  #endpoint;
  #letter;
  #form;
  #ratelimit = null;
  #settings = null;
  #decisions = [];
  #states = new Map();
  #seq = 0;
  #generation = 0;
  #reads = 0;
  #lastRead = new Map();
  #log;

  /**
   * @param element the panel, from the page's template
   * @param letter "a" or "b": names the panel's keys (`playground:{<letter>-<algorithm>}:<identifier>`)
   */
  constructor(element, letter, title, defaults, { Ratelimit, endpoint }) {
    this.element = element;
    this.#Ratelimit = Ratelimit;
    this.#endpoint = endpoint;
    this.#letter = letter;
    element.id = `panel-${letter}`;
    const heading = element.querySelector(".panel-title");
    heading.textContent = title;
    heading.id = `panel-${letter}-title`;
    // Two panels have the same controls: each is named by its title, and so is its log.
    element.setAttribute("aria-labelledby", heading.id);
    element.querySelector(".log-wrap").setAttribute("aria-label", `${title}: decision log`);
    element.querySelector(".chart").id = `chart-${letter}`;
    const help = element.querySelector(".interval-help");
    help.id = `interval-help-${letter}`;
    this.#form = element.querySelector("form.limiter");
    this.#form.elements.interval.setAttribute("aria-describedby", help.id);
    for (const [name, value] of Object.entries(defaults)) this.#form.elements[name].value = value;
    this.#log = new DecisionLog(element.querySelector("table.log"), element.querySelector(".tally"));
    this.#form.addEventListener("change", () => this.configure());
    this.#form.addEventListener("submit", (event) => event.preventDefault());
  }

  /** The identifiers whose state the panel reads and draws. */
  identifiers = [];

  /**
   * Builds the limiter from the settings. Invalid settings are refused by the package with a message, which the panel
   * shows, keeping the limiter it had.
   */
  async configure() {
    const elements = this.#form.elements;
    const algorithm = elements.algorithm.value;
    const usesRate = algorithm === "token_bucket" || algorithm === "gcra";
    this.#form.querySelector(".rate-field").hidden = !usesRate;
    this.#form.querySelector(".limit-label").textContent = usesRate ? (algorithm === "gcra" ? "Burst" : "Capacity") : "Limit";
    this.element.querySelector(".description").textContent = DESCRIPTIONS[algorithm];
    const settings = {
      algorithm,
      limit: numeric(elements.limit),
      interval: elements.interval.value.trim(),
      rate: usesRate ? numeric(elements.rate) : undefined,
    };
    const error = this.#form.querySelector(".config-error");
    let ratelimit;
    try {
      ratelimit = new this.#Ratelimit({
        ...this.#endpoint,
        prefix: "playground",
        limiter: { ...limiterOf(this.#Ratelimit, settings), name: `${this.#letter}-${algorithm}` },
        // Every decision goes to Redis (no block cache), and a failing store is shown, not papered over.
        cache: false,
        onError: "throw",
      });
    } catch (e) {
      error.textContent = `${e.message} (${e.code ?? e.name}); the panel keeps its previous limiter.`;
      return;
    }
    error.textContent = "";
    // Settings changed again while this one was resetting: the later call applies its own.
    const generation = ++this.#generation;
    // A new limit starts clean: the old state would mislead, and the new keys may hold an earlier session's state.
    await this.#forget(this.#ratelimit);
    await this.#forget(ratelimit);
    if (generation !== this.#generation) return;
    this.#ratelimit = ratelimit;
    this.#settings = { ...settings, rate: usesRate ? settings.rate : settings.limit };
    this.#states.clear();
    this.#clearDecisions();
    await this.refresh();
    if (generation !== this.#generation) return;
    // What is in force, for whoever watches the page (the browser tests wait on it).
    this.element.dataset.applied = `${algorithm} ${settings.limit} ${settings.interval} ${this.#settings.rate}`;
    this.element.dataset.generation = generation;
  }

  /** Permits per second the limit allows in the long run (the chart's dashed line); 0 until a state is read. */
  get ratePerSecond() {
    const intervalMs = [...this.#states.values()].find((state) => state.interval)?.interval;
    return intervalMs ? (this.#settings.rate * 1000) / intervalMs : 0;
  }

  /**
   * Takes `permits` for `identifier`; resolves to the log entry. A decision made under settings that have changed
   * since is not logged: it belongs to a limiter the panel no longer shows.
   */
  async send(identifier, permits) {
    const ratelimit = this.#ratelimit;
    const seq = ++this.#seq;
    let entry;
    try {
      const result = await ratelimit.limit(identifier, { permits });
      const { success, remaining, retryAfter, reset } = result;
      entry = { seq, identifier, permits, success, remaining, retryAfter, reset, at: serverNow() ?? Date.now() };
    } catch (e) {
      entry = { seq, identifier, permits, error: `${e.message} (${e.code ?? e.name})` };
    }
    if (ratelimit !== this.#ratelimit) return entry;
    if (!entry.error) this.#decisions.push(entry);
    // Decisions older than the chart's span are not needed (pruned here too: a hidden tab does not draw).
    while (this.#decisions.length && this.#decisions[0].at < entry.at - 60_000) this.#decisions.shift();
    this.#log.add(entry);
    return entry;
  }

  /**
   * Reads every watched identifier's state from Redis, at one server moment per identifier. A read that was
   * overtaken (by a newer read, or by new settings) is dropped, so a slow poll never replaces fresher state.
   */
  async refresh() {
    const ratelimit = this.#ratelimit;
    if (!ratelimit) return;
    for (const identifier of this.identifiers) {
      const read = ++this.#reads;
      const sentAt = performance.now();
      let state;
      try {
        [state] = await ratelimit.state(identifier);
        observe(state.now, sentAt, performance.now());
      } catch (e) {
        state = { error: `${e.message} (${e.code ?? e.name})` };
      }
      if (ratelimit !== this.#ratelimit || read < (this.#lastRead.get(identifier) ?? 0)) continue;
      this.#lastRead.set(identifier, read);
      this.#states.set(identifier, state);
    }
    for (const identifier of this.#states.keys()) {
      if (!this.identifiers.includes(identifier)) this.#states.delete(identifier);
    }
  }

  /** Forgets the state of every watched identifier in Redis, and the log and chart. */
  async resetState() {
    await this.#forget(this.#ratelimit);
    this.#clearDecisions();
  }

  /** Deletes the watched identifiers' keys of `ratelimit` (if any). A failure shows on the next state read. */
  async #forget(ratelimit) {
    for (const identifier of ratelimit ? this.identifiers : []) await ratelimit.reset(identifier).catch(() => {});
  }

  #clearDecisions() {
    this.#decisions = [];
    this.#log.clear();
  }

  /** Draws the latest state, moved on to the estimated server time. */
  draw() {
    const now = serverNow();
    if (now === null || !this.#settings) return;
    const container = this.element.querySelector(".state");
    const views = [];
    for (const [identifier, state] of this.#states) {
      if (state.error) {
        const failed = document.createElement("p");
        failed.className = "error";
        failed.textContent = `${identifier}: could not read the state: ${state.error}`;
        views.push(failed);
        continue;
      }
      const denials = this.#decisions.filter((d) => d.identifier === identifier && !d.success);
      views.push(stateView(identifier, state, now, denials));
    }
    container.replaceChildren(...views);
    drawChart(this.element.querySelector(".chart"), this.#decisions, now, this.ratePerSecond);
  }
}
