import type { Action } from "../core/types.js";
import type { ListStats } from "../lists/refreshing.js";
import type { DecisionFigures } from "./decision-stats.js";
import type { HeavyHitter } from "./heavy-hitters.js";
import type { OverrideFigures } from "./override-board.js";
import type { PolicySummary } from "./policy-summary.js";
import type { SecondSample } from "./rate-series.js";
import type { StoreHealth } from "./store-health.js";

/** What the dashboard, `/events` and `/api/snapshot` show of a running server (gateway or rls). */
export interface GatewaySnapshot {
  readonly now: number;
  readonly startedAt: number;
  readonly policyLoadedAt: number;
  readonly limiting: boolean;
  readonly upstream: string;
  readonly store: string;
  readonly inFlight: number;
  readonly totals: Readonly<Record<Action, number>>;
  readonly series: readonly SecondSample[];
  readonly topOffenders: readonly HeavyHitter[];
  /** The top offenders cover the last one to two of these periods. */
  readonly topOffendersPeriodMs: number;
  readonly blockCacheHits: number;
  readonly lists: readonly ListStats[];
  readonly policy: PolicySummary;
  /** The store's health, as `/healthz` reports it. */
  readonly storeHealth: StoreHealth;
  readonly decisions: DecisionFigures;
  /** The operators' overrides this server holds (docs/overrides.md), from its own snapshot. */
  readonly overrides: OverrideFigures;
}
