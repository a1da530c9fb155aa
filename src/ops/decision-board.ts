import type { Action } from "../core/types.js";
import type { Verdict } from "../http/respond.js";
import { DecisionStats } from "./decision-stats.js";
import { RecentHeavyHitters } from "./heavy-hitters.js";
import { RateSeries } from "./rate-series.js";
import type { GatewaySnapshot } from "./snapshot.js";

/** A decision as the operations plane counts it: the fields of a Verdict it reads. */
export type BoardDecision = Pick<
  Verdict,
  "action" | "reason" | "subject" | "durationMs" | "shadowed"
>;

/** The snapshot's fields that a board fills. */
export type BoardFigures = Pick<
  GatewaySnapshot,
  "totals" | "series" | "topOffenders" | "topOffendersPeriodMs" | "decisions"
>;

/** How many seconds of decisions per second the dashboard draws. */
const SERIES_SECONDS = 120;
/** How many subjects the dashboard lists among the top offenders. */
const TOP_OFFENDERS = 10;

/**
 * What a server has decided since start, as its dashboard shows it: totals by action, the
 * decisions per second, the most refused subjects, failed-open and shadow counts, decision
 * time. The gateway and rls record every decision here alike; all of it is bounded.
 */
export class DecisionBoard {
  readonly #stats = new DecisionStats();
  readonly #series = new RateSeries(SERIES_SECONDS);
  readonly #offenders: RecentHeavyHitters;
  readonly #totals: Record<Action, number> = { allow: 0, block: 0, challenge: 0, unavailable: 0 };

  /** `topKeysCapacity` slots of the top-offenders sketch, over one to two `topKeysPeriodMs`. */
  constructor(options: { readonly topKeysCapacity?: number; readonly topKeysPeriodMs?: number }) {
    this.#offenders = new RecentHeavyHitters(
      options.topKeysCapacity ?? 100,
      options.topKeysPeriodMs ?? 5 * 60_000,
    );
  }

  record(decision: BoardDecision, now: number): void {
    this.#stats.record(decision);
    this.#totals[decision.action]++;
    this.#series.record(decision.action, now);
    if (decision.action === "block" || decision.action === "challenge") {
      this.#offenders.offer(decision.subject, now);
    }
  }

  figures(now: number): BoardFigures {
    return {
      totals: { ...this.#totals },
      series: this.#series.samples(now),
      topOffenders: this.#offenders.top(TOP_OFFENDERS, now),
      topOffendersPeriodMs: this.#offenders.periodMs,
      decisions: this.#stats.figures(),
    };
  }
}
