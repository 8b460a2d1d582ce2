// Draws one identifier's state as Redis holds it (a `LimitState` from Ratelimit.state), moved on to the estimated
// server time `now` for the animation only. The numbers in the text are the ones Redis gave; data-* attributes carry
// them for the browser tests.
import { decimal, duration, figure, html, svg } from "./dom.js";

const WIDTH = 600;
const MAX_ROWS = 20;

/**
 * The view of `state` for `identifier` at `now`. `denials` are this identifier's recent denied decisions
 * (`{at, retryAfter, permits}`), drawn on the sliding log's timeline with when they could retry.
 */
export function stateView(identifier, state, now, denials) {
  const drawn = DRAW[state.algorithm](state, now, denials);
  const view = html(
    "div",
    { class: "identifier-state", "data-identifier": identifier, "data-algorithm": state.algorithm, "data-now": state.now, "data-key": state.key },
    html("p", { class: "identifier" }, html("strong", {}, identifier), ` — ${drawn.summary}`),
    drawn.picture,
    html("p", { class: "raw" }, rawLine(state)),
  );
  Object.assign(view.dataset, drawn.data);
  return view;
}

/** What was read, as Redis commands would show it. */
function rawLine(state) {
  const expires = state.expiresAt === null ? "no key (a fresh identifier)" : `expires in ${duration(state.expiresAt - state.now)}`;
  const value =
    state.algorithm === "sliding_log" ? `zset of ${state.held} permits held` : state.stored ? JSON.stringify(state.stored) : "no value";
  return `${state.key} → ${value} · ${expires}`;
}

const DRAW = {
  sliding_log: slidingLog,
  fixed_window: fixedWindow,
  sliding_window: slidingWindow,
  token_bucket: tokenBucket,
  gcra: gcra,
};

/**
 * The sliding log as a timeline from `now − interval` to `now + interval`: the shaded band is the window, each grant
 * a bar from its grant to when it frees (from Redis). Denials are marked, with a dashed line to when they could retry.
 */
function slidingLog(state, now, denials) {
  const { interval, limit, held, grants } = state;
  const start = now - interval;
  const x = (t) => ((t - start) / (2 * interval)) * WIDTH;
  const live = grants.filter((grant) => grant.freesAt > now);
  const shown = live.slice(0, MAX_ROWS);
  const recentDenials = denials.filter((d) => d.at + d.retryAfter > start).slice(-5);
  const rowHeight = 12;
  const top = 16;
  const height = top + (shown.length + (recentDenials.length ? 1 : 0)) * (rowHeight + 3) + 22;
  const bars = shown.map((grant, row) => {
    const y = top + row * (rowHeight + 3);
    const grantedAt = grant.freesAt - interval;
    const left = Math.max(0, x(grantedAt));
    return svg(
      "g",
      { "data-grant": grant.id, "data-permits": grant.permits, "data-frees-at": grant.freesAt },
      svg("rect", { class: "grant", x: left, y, width: Math.max(2, x(grant.freesAt) - left), height: rowHeight, rx: 2 }),
      svg(
        "text",
        { x: Math.min(x(grant.freesAt) + 4, WIDTH - 4), y: y + rowHeight - 2, "text-anchor": x(grant.freesAt) > WIDTH - 140 ? "end" : "start" },
        `${grant.permits > 1 ? `×${grant.permits} · ` : ""}frees in ${duration(grant.freesAt - now)}`,
      ),
    );
  });
  const denialY = top + shown.length * (rowHeight + 3) + rowHeight / 2;
  const marks = recentDenials.map((denial) => {
    const at = x(denial.at);
    const until = x(denial.at + denial.retryAfter);
    return svg(
      "g",
      { "data-denial": denial.at, "data-retry-after": denial.retryAfter },
      svg("line", { class: "denial", x1: Math.max(0, at), x2: Math.max(0, Math.min(until, WIDTH)), y1: denialY, y2: denialY }),
      svg("path", { class: "denial-mark", d: `M${at - 4},${denialY - 4} l8,8 m0,-8 l-8,8`, stroke: "var(--denied)", "stroke-width": 2 }),
    );
  });
  const last = recentDenials.at(-1);
  const axisY = height - 16;
  const freeNext = live.length ? duration(live[0].freesAt - now) : null;
  const label =
    `Sliding log: ${held} of ${limit} permits held in the last ${duration(interval)}` +
    (freeNext ? `; the next frees in ${freeNext}.` : "; the window is empty.");
  const picture = figure(
    WIDTH,
    height,
    label,
    svg("rect", { class: "window", x: 0, y: 0, width: x(now), height: axisY }),
    svg("text", { x: 4, y: 11, class: "muted" }, `window: last ${duration(interval)}`),
    ...bars,
    ...marks,
    last ? svg("text", { x: WIDTH - 4, y: denialY + 4, "text-anchor": "end" }, `✕ denied: retry after ${duration(last.retryAfter)}`) : "",
    live.length > shown.length ? svg("text", { x: WIDTH / 2 + 4, y: 11, class: "muted" }, `+${live.length - shown.length} more grants`) : "",
    svg("line", { class: "now", x1: x(now), x2: x(now), y1: 0, y2: axisY }),
    svg("line", { class: "axis", x1: 0, x2: WIDTH, y1: axisY, y2: axisY }),
    svg("text", { x: 0, y: height - 3, class: "muted" }, `−${duration(interval)}`),
    svg("text", { x: x(now), y: height - 3, "text-anchor": "middle" }, "now"),
    svg("text", { x: WIDTH, y: height - 3, "text-anchor": "end", class: "muted" }, `+${duration(interval)}`),
  );
  picture.dataset.held = held;
  return { picture, summary: `${held} of ${limit} permits held`, data: { held, remaining: Math.max(0, limit - held) } };
}

/** A horizontal gauge: `value` of `max`, with an optional lighter `extra` segment after it; `ends` labels its ends. */
function gauge(label, value, max, extra = 0, ends = ["0", String(max)]) {
  const height = 34;
  const width = (v) => Math.max(0, Math.min(1, v / max)) * WIDTH;
  return figure(
    WIDTH,
    height,
    label,
    svg("rect", { class: "gauge-back", x: 0, y: 4, width: WIDTH, height: 18, rx: 3 }),
    svg("rect", { class: "gauge-fill", x: 0, y: 4, width: width(value), height: 18, rx: 3 }),
    extra > 0 ? svg("rect", { class: "gauge-weighted", x: width(value), y: 4, width: width(value + extra) - width(value), height: 18 }) : "",
    svg("text", { x: 0, y: height, class: "muted" }, ends[0]),
    svg("text", { x: WIDTH, y: height, "text-anchor": "end", class: "muted" }, ends[1]),
  );
}

/** The fixed window: its count against the limit, and how far through the window the clock is. */
function fixedWindow(state, now) {
  const { limit, count, windowStart, windowEnd } = state;
  const endsIn = Math.max(0, windowEnd - now);
  // The estimated clock may trail the moment Redis was read by a few ms.
  const elapsed = Math.min(windowEnd - windowStart, Math.max(0, now - windowStart));
  const summary = `${count} of ${limit} counted in this window; it ends in ${duration(endsIn)}`;
  const picture = html(
    "div",
    {},
    gauge(`Fixed window: ${count} of ${limit} permits counted`, count, limit),
    gauge(`${duration(elapsed)} of the ${duration(windowEnd - windowStart)} window passed`, elapsed, windowEnd - windowStart, 0, [
      "window start",
      `ends in ${duration(endsIn)}`,
    ]),
  );
  return { picture, summary, data: { count, windowStart, windowEnd } };
}

/**
 * The sliding window counter: the current window's count (solid) plus the previous window's, weighted by how much
 * of it the sliding window still covers (light), against the limit.
 */
function slidingWindow(state, now) {
  const { limit, current, previous, weightedCount, windowStart, windowEnd } = state;
  const weightedPrevious = weightedCount - current;
  const summary =
    `${decimal(weightedCount)} of ${limit}: ${current} in this window + ${previous} in the previous × ` +
    `${decimal(previous ? weightedPrevious / previous : 0)} still covered; the window ends in ${duration(Math.max(0, windowEnd - now))}`;
  const picture = gauge(`Sliding window: weighted count ${decimal(weightedCount)} of ${limit}`, current, limit, weightedPrevious);
  return { picture, summary, data: { current, previous, weighted: weightedCount, windowStart } };
}

/** The token bucket: its tokens (refilling continuously) against its capacity. */
function tokenBucket(state) {
  const { limit, tokens, rate, interval } = state;
  const fullIn = ((limit - tokens) * interval) / rate;
  const summary = `${decimal(tokens)} of ${limit} tokens; +${rate} per ${duration(interval)}` + (tokens < limit ? `, full in ${duration(fullIn)}` : ", full");
  return { picture: gauge(`Token bucket: ${decimal(tokens)} of ${limit} tokens`, tokens, limit), summary, data: { tokens } };
}

/** GCRA: the theoretical arrival time (TAT), and the burst it leaves, as a bucket of the same numbers would hold. */
function gcra(state) {
  const { limit, tokens, tat, rate, interval } = state;
  const ahead = Math.max(0, tat - state.now);
  const summary = `TAT ${ahead > 0 ? `now + ${duration(ahead)}` : "≤ now (whole)"}; a burst of ${decimal(tokens)} of ${limit} fits; one permit every ${duration(interval / rate)}`;
  return { picture: gauge(`GCRA: ${decimal(tokens)} of ${limit} burst left`, tokens, limit), summary, data: { tat, tokens } };
}
