import type { Verdict } from "../http/respond.js";

/** Decisions whose time the dashboard's quantiles are computed over (the most recent ones). */
const RECENT_DECISIONS = 1024;

/** What the dashboard shows of recent decisions: failed-open and local counts, decision time. */
export interface DecisionFigures {
  /** Decisions that failed open (the store failed; the rules' fail mode let them through). */
  readonly failedOpen: number;
  /** Decisions counted in this process because the store failed (`failMode: local`). */
  readonly failedLocal: number;
  /** Decision time over the most recent decisions, in milliseconds. */
  readonly decisionMs: { readonly p50: number; readonly p99: number; readonly count: number };
}

/** Failed-open and local counts since start, and the time of the most recent decisions (bounded ring). */
export class DecisionStats {
  readonly #times = new Float64Array(RECENT_DECISIONS);
  #recorded = 0;
  #failedOpen = 0;
  #failedLocal = 0;

  record(verdict: Pick<Verdict, "durationMs" | "reason">): void {
    this.#times[this.#recorded % RECENT_DECISIONS] = verdict.durationMs;
    this.#recorded++;
    if (verdict.reason === "store-failed-open") this.#failedOpen++;
    else if (verdict.reason === "store-failed-local") this.#failedLocal++;
  }

  figures(): DecisionFigures {
    const count = Math.min(this.#recorded, RECENT_DECISIONS);
    const sorted = this.#times.slice(0, count).sort();
    const at = (share: number) => (count === 0 ? 0 : (sorted[Math.ceil(share * count) - 1] ?? 0));
    return {
      failedOpen: this.#failedOpen,
      failedLocal: this.#failedLocal,
      decisionMs: { p50: at(0.5), p99: at(0.99), count },
    };
  }
}
