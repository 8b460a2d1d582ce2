// Allowed vs denied permits per second over the last 30 seconds, against the configured rate (the dashed line):
// what got through never rises above the line for long, whatever the traffic.
import { decimal, figure, svg } from "./dom.js";

const SECONDS = 30;
const WIDTH = 600;
const HEIGHT = 150;
const LEFT = 34;
const BOTTOM = 18;

/**
 * Draws `decisions` (`{at, permits, success}`, server ms) as stacked bars per second, ending at `now`; `ratePerSecond`
 * is the configured rate.
 */
export function drawChart(container, decisions, now, ratePerSecond) {
  const currentSecond = Math.floor(now / 1000);
  const first = currentSecond - SECONDS + 1;
  const allowed = new Array(SECONDS).fill(0);
  const denied = new Array(SECONDS).fill(0);
  for (const { at, permits, success } of decisions) {
    const slot = Math.floor(at / 1000) - first;
    if (slot < 0 || slot >= SECONDS) continue;
    (success ? allowed : denied)[slot] += permits;
  }
  const highest = Math.max(ratePerSecond * 1.25, ...allowed.map((a, i) => a + denied[i]), 1);
  const hatch = `${container.id}-hatch`;
  const plotHeight = HEIGHT - BOTTOM - 6;
  const y = (value) => HEIGHT - BOTTOM - (value / highest) * plotHeight;
  const slotWidth = (WIDTH - LEFT) / SECONDS;
  const bars = [];
  for (let i = 0; i < SECONDS; i++) {
    const x = LEFT + i * slotWidth + 1;
    if (allowed[i]) bars.push(svg("rect", { class: "bar-allowed", x, width: slotWidth - 2, y: y(allowed[i]), height: y(0) - y(allowed[i]) }));
    if (denied[i]) {
      const top = y(allowed[i] + denied[i]);
      bars.push(svg("rect", { class: "bar-denied", fill: `url(#${hatch})`, x, width: slotWidth - 2, y: top, height: y(allowed[i]) - top }));
    }
  }
  const totalAllowed = allowed.reduce((a, b) => a + b, 0);
  const totalDenied = denied.reduce((a, b) => a + b, 0);
  const label =
    `Last ${SECONDS} seconds: ${totalAllowed} permits allowed and ${totalDenied} denied; ` +
    `the configured rate is ${decimal(ratePerSecond)} per second.`;
  container.replaceChildren(
    figure(
      WIDTH,
      HEIGHT,
      label,
      svg(
        "defs",
        {},
        svg(
          "pattern",
          { id: hatch, width: 6, height: 6, patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)" },
          svg("rect", { width: 6, height: 6, fill: "var(--card)" }),
          svg("line", { x1: 0, y1: 0, x2: 0, y2: 6, stroke: "var(--denied)", "stroke-width": 3 }),
        ),
      ),
      svg("line", { class: "axis", x1: LEFT, x2: WIDTH, y1: y(0), y2: y(0) }),
      svg("text", { x: LEFT - 4, y: y(0), "text-anchor": "end", class: "muted" }, "0"),
      svg("text", { x: LEFT - 4, y: y(highest) + 9, "text-anchor": "end", class: "muted" }, decimal(highest, 0)),
      svg("text", { x: LEFT, y: HEIGHT - 4, class: "muted" }, `−${SECONDS} s`),
      svg("text", { x: WIDTH, y: HEIGHT - 4, "text-anchor": "end", class: "muted" }, "now"),
      ...bars,
      svg("line", { class: "rate-line", x1: LEFT, x2: WIDTH, y1: y(ratePerSecond), y2: y(ratePerSecond) }),
      svg("text", { x: LEFT + 6, y: y(ratePerSecond) - 4 }, `configured rate: ${decimal(ratePerSecond)}/s`),
      svg("text", { x: WIDTH, y: 10, "text-anchor": "end" }, "■ allowed  ▨ denied (permits)"),
    ),
  );
  Object.assign(container.dataset, { allowed: totalAllowed, denied: totalDenied });
}
