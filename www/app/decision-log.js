// The decision log: every decision as the limiter answered it (allowed/denied, remaining, retryAfter, reset), newest
// first, and a tally.
import { duration, html } from "./dom.js";

const KEPT_ROWS = 200;

export class DecisionLog {
  #body;
  #tally;
  #allowed = 0;
  #denied = 0;
  #failed = 0;

  constructor(table, tally) {
    this.#body = table.querySelector("tbody");
    this.#tally = tally;
    this.#showTally();
  }

  /** Adds a decision `{seq, identifier, permits, success, remaining, retryAfter, reset, at}` or a failure `{error}`. */
  add(entry) {
    let row;
    if (entry.error) {
      this.#failed += 1;
      row = html("tr", { class: "failed" }, html("td", {}, String(entry.seq)), html("td", { colspan: 6 }, `error: ${entry.error}`));
    } else {
      if (entry.success) this.#allowed += 1;
      else this.#denied += 1;
      const cells = [
        String(entry.seq),
        entry.identifier,
        String(entry.permits),
        entry.success ? "allowed" : "denied",
        String(entry.remaining),
        entry.success ? "—" : duration(entry.retryAfter),
        duration(Math.max(0, entry.reset - entry.at)),
      ];
      row = html(
        "tr",
        { class: entry.success ? "allowed" : "denied", "data-success": entry.success, "data-retry-after": entry.retryAfter },
        ...cells.map((text) => html("td", {}, text)),
      );
    }
    this.#body.prepend(row);
    while (this.#body.rows.length > KEPT_ROWS) this.#body.lastElementChild.remove();
    this.#showTally();
  }

  clear() {
    this.#body.replaceChildren();
    this.#allowed = this.#denied = this.#failed = 0;
    this.#showTally();
  }

  #showTally() {
    const total = this.#allowed + this.#denied;
    const failed = this.#failed ? `, ${this.#failed} failed` : "";
    this.#tally.textContent = `${total} decided: ${this.#allowed} allowed, ${this.#denied} denied${failed}`;
    Object.assign(this.#tally.dataset, { allowed: this.#allowed, denied: this.#denied, failed: this.#failed });
  }
}
