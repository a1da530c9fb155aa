import type { Verdict } from "../http/respond.js";

/** Decisions whose time the dashboard's quantiles are computed over (the most recent ones). */
const RECENT_DECISIONS = 1024;

/**
 * Shadow rules counted by name. A policy has far fewer rules; the bound keeps reload after
 * reload of renamed rules from growing the map (a rule beyond it still counts in the total).
 */
const MAX_SHADOW_RULES = 1024;

/** What the dashboard shows of recent decisions: failed-open and local counts, decision time. */
export interface DecisionFigures {
  /** Decisions that failed open (the store failed; the rules' fail mode let them through). */
  readonly failedOpen: number;
  /** Decisions counted in this process because the store failed (`failMode: local`). */
  readonly failedLocal: number;
  /** Decisions a shadow rule would have refused (they were admitted), since start. */
  readonly shadowRefusals: number;
  /** The same by shadow rule (a decision two shadow rules would have refused counts for each). */
  readonly shadowRefusalsByRule: Readonly<Record<string, number>>;
  /** Decision time over the most recent decisions, in milliseconds. */
  readonly decisionMs: { readonly p50: number; readonly p99: number; readonly count: number };
}

/**
 * Failed-open, local and shadow refusal counts since start, and the time of the most recent
 * decisions (bounded ring).
 */
export class DecisionStats {
  readonly #times = new Float64Array(RECENT_DECISIONS);
  #recorded = 0;
  #failedOpen = 0;
  #failedLocal = 0;
  #shadowRefusals = 0;
  readonly #shadowByRule = new Map<string, number>();

  record(verdict: Pick<Verdict, "durationMs" | "reason" | "shadowed">): void {
    this.#times[this.#recorded % RECENT_DECISIONS] = verdict.durationMs;
    this.#recorded++;
    if (verdict.reason === "store-failed-open") this.#failedOpen++;
    else if (verdict.reason === "store-failed-local") this.#failedLocal++;
    if (verdict.shadowed.length === 0) return;
    this.#shadowRefusals++;
    for (const rule of verdict.shadowed) {
      const count = this.#shadowByRule.get(rule);
      if (count !== undefined) this.#shadowByRule.set(rule, count + 1);
      else if (this.#shadowByRule.size < MAX_SHADOW_RULES) this.#shadowByRule.set(rule, 1);
    }
  }

  figures(): DecisionFigures {
    const count = Math.min(this.#recorded, RECENT_DECISIONS);
    const sorted = this.#times.slice(0, count).sort();
    const at = (share: number) => (count === 0 ? 0 : (sorted[Math.ceil(share * count) - 1] ?? 0));
    return {
      failedOpen: this.#failedOpen,
      failedLocal: this.#failedLocal,
      shadowRefusals: this.#shadowRefusals,
      shadowRefusalsByRule: Object.fromEntries(this.#shadowByRule),
      decisionMs: { p50: at(0.5), p99: at(0.99), count },
    };
  }
}
