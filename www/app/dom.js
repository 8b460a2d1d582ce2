// Small helpers for building the page's SVG and HTML without a framework, and for showing times.

const SVG = "http://www.w3.org/2000/svg";

/** An SVG element with attributes and children (elements or text). */
export function svg(tag, attributes = {}, ...children) {
  const element = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value !== undefined && value !== null) element.setAttribute(name, String(value));
  }
  element.append(...children);
  return element;
}

/** An HTML element with attributes and children. */
export function html(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value !== undefined && value !== null) element.setAttribute(name, String(value));
  }
  element.append(...children);
  return element;
}

/** A titled SVG image: `label` is what a screen reader says for the picture. */
export function figure(width, height, label, ...children) {
  return svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": label }, svg("title", {}, label), ...children);
}

/** Milliseconds as a person reads them: "420 ms", "1.25 s", "3 min". */
export function duration(ms) {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  return `${(ms / 60_000).toFixed(1)} min`;
}

/** A number with at most `digits` decimals, without trailing zeros. */
export function decimal(value, digits = 2) {
  return String(Number(value.toFixed(digits)));
}
