/** The simulation report: what `--json` prints, and what the text and HTML reports show. */
import type { Accounting, Timeline } from "./accounting.js";
import type { Scenario } from "./scenario.js";
import type { RegionWaits } from "./waits.js";
import type { Mode } from "./world.js";

export interface ModeReport {
  readonly mode: Mode;
  /** The fail mode every rule that does not fail closed ran with (scenario `failModes` only). */
  readonly failMode?: "local" | "open";
  readonly requests: number;
  readonly admitted: number;
  readonly legitimate: {
    readonly requests: number;
    /** Requests of clients in report windows where the exact reference refused none of theirs. */
    readonly underLimitRequests: number;
    readonly refusedUnderLimit: number;
    /** Clients at their limit: what exact counting admitted and this mode did not. */
    readonly atLimit: ReturnType<Accounting["legitimateOutcomes"]>["atLimit"];
    /** Every legitimate request refused that the reference admitted, at the limit or not. */
    readonly refusedWhereExactAdmitted: number;
  };
  readonly attackers: { readonly requests: number; readonly admitted: number };
  readonly overAdmission: ReturnType<Accounting["overAdmission"]>;
  readonly store: {
    readonly operations: number;
    readonly readUnits: number;
    readonly writeUnits: number;
    readonly replicatedWriteUnits: number;
    readonly ttlReplicatedDeletes: number;
    readonly perRequest: {
      readonly operations: number;
      readonly readUnits: number;
      readonly writeUnits: number;
      readonly replicatedWriteUnits: number;
    };
    readonly subjects: ReturnType<Accounting["subjectClasses"]>;
  };
  readonly lostIncrements: { counted: number; stored: number; lost: number; share: number };
  readonly latencyMs: { readonly p50: number; readonly p99: number };
  readonly legitimateLatencyMs: {
    readonly p50: number;
    readonly p99: number;
    /** By the region the requests arrived in. */
    readonly byRegion: Readonly<Record<string, { readonly p50: number; readonly p99: number }>>;
  };
  /** Legitimate decisions that waited for something farther than the region's store, and why (waits.ts). */
  readonly legitimateWaits: Readonly<Record<string, RegionWaits>>;
  readonly failedOpen: number;
  readonly failedClosed: number;
  /** Decisions counted in the instance because the store failed (`failMode: local`). */
  readonly failedLocal: number;
  readonly blockedCached: number;
  readonly instances: { readonly created: number; readonly coldStarts: number };
  readonly cost: MonthlyCost;
  readonly timeline: readonly Timeline[];
  readonly loop: { readonly events: number; readonly drains: number };
}

/**
 * A mode's name in the text and HTML reports, by what it does where it ran: `exact` on a
 * DynamoDB global table counts each region's items and adds the others' as replication brings
 * them, so it admits up to the limit in each region (`spread-attack`): there it is called
 * `per-region`. With `, fail local` when fail modes are compared. (`--json` keeps the scenario's
 * mode names.)
 */
export function modeLabel(
  mode: ModeReport,
  where: Pick<SimulationReport, "store" | "replicas">,
): string {
  const name =
    mode.mode === "exact" && where.store === "dynamodb" && where.replicas.length > 1
      ? "per-region"
      : mode.mode;
  return mode.failMode === undefined ? name : `${name}, fail ${mode.failMode}`;
}

export interface MonthlyCost {
  /** Monthly requests over simulated requests: every count below is scaled by it. */
  readonly scale: number;
  readonly writeUnits: number;
  readonly replicatedWriteUnits: number;
  readonly readUnits: number;
  readonly dynamodb: number;
  readonly redis: number;
  readonly lambdaEdge: number;
  readonly total: number;
}

export interface SimulationReport {
  readonly scenario: string;
  readonly seed: number;
  readonly durationSeconds: number;
  readonly store: string;
  readonly replicas: readonly string[];
  readonly deployment: string;
  readonly monthlyRequests: number;
  readonly modes: readonly ModeReport[];
}

/**
 * The month's bill, extrapolated linearly from the simulated requests. TTL deletes are counted
 * once per item ever written; on a global table each replicates to every other replica as a
 * replicated write (the deleting region's own delete is free).
 */
export function costOf(
  scenario: Scenario,
  tally: Accounting,
  ttlReplicatedDeletes: number,
): MonthlyCost {
  const price = scenario.pricing;
  const scale = tally.requests === 0 ? 0 : scenario.monthlyRequests / tally.requests;
  const writeUnits = tally.writeUnits * scale;
  const replicatedWriteUnits = (tally.replicatedWriteUnits + ttlReplicatedDeletes) * scale;
  const readUnits = tally.readUnits * scale;
  const dynamodb =
    scenario.store.kind === "dynamodb"
      ? (writeUnits * price.writeUnitPerMillion +
          replicatedWriteUnits * price.replicatedWriteUnitPerMillion +
          readUnits * price.readUnitPerMillion) /
        1e6
      : 0;
  const redis = scenario.store.kind === "redis" ? price.redisPerMonth : 0;
  let lambdaEdge = 0;
  const deployment = scenario.deployment;
  if (deployment.kind === "lambda-edge") {
    const gbSeconds = ((tally.busyMs * scale) / 1000) * (deployment.memoryMb / 1024);
    lambdaEdge =
      (scenario.monthlyRequests / 1e6) * price.lambdaEdgeRequestPerMillion +
      gbSeconds * price.lambdaEdgeGbSecond;
  }
  return {
    scale,
    writeUnits,
    replicatedWriteUnits,
    readUnits,
    dynamodb,
    redis,
    lambdaEdge,
    total: dynamodb + redis + lambdaEdge,
  };
}
