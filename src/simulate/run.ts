/**
 * `simulate(scenario)`: runs every counting mode of a scenario over the same seeded traffic,
 * each in a world of its own (event loop, table model, instances), and reports them side by
 * side. The decision engine and the stores are the real code; what is modeled is the network,
 * DynamoDB's tables and replication, the Redis primary's round trip, and the deployment.
 */
import type { Decision } from "../core/decision.js";
import type { ResolvedPolicy, ResolvedRule } from "../core/model.js";
import type { Override, OverrideInput } from "../core/overrides.js";
import { checkedOverrides } from "../offline/overrides-file.js";
import { offlinePolicy } from "../offline/policy.js";
import { ReferenceEngine } from "../offline/reference.js";
import { loadPolicy } from "../policy/load.js";
import { Accounting, lostIncrements } from "./accounting.js";
import { Deployment } from "./deployment.js";
import { EventLoop } from "./event-loop.js";
import { Random } from "./random.js";
import type { ModeReport, SimulationReport } from "./report.js";
import { costOf } from "./report.js";
import type { Scenario } from "./scenario.js";
import { type Arrival, SIMULATED_USERS, scheduleTraffic } from "./traffic.js";
import { WaitCauses } from "./waits.js";
import { isHybridMode, type Mode, World } from "./world.js";

/** How long after the last arrival the loop runs on, so calls in flight and refunds land. */
const SETTLE_MS = 30_000;

export interface SimulateOptions {
  /** Overrides the scenario's seed. */
  readonly seed?: number | undefined;
  /** Told of every decision (tests compare them with real stores). */
  readonly onDecision?: (mode: Mode, arrival: Arrival, decision: Decision, epochAt: number) => void;
  /** How often the loop drains microtasks (see event-loop.ts); for the benchmark. */
  readonly drainEach?: "instant" | "event";
  /** Told how far the run is, now and then (a progress display; it reads no simulation state). */
  readonly onProgress?: (progress: SimulationProgress) => void;
  /**
   * Operators' overrides in force from the start, on every instance and the reference
   * (`--overrides FILE`, offline/overrides-file.ts), checked against the scenario's policy;
   * `overridesFile` names them in errors.
   */
  readonly overrides?: readonly OverrideInput[];
  readonly overridesFile?: string;
}

export interface SimulationProgress {
  readonly mode: Mode;
  /** 0 for the first mode of the scenario. */
  readonly modeIndex: number;
  readonly modes: number;
  /** Virtual ms simulated in this mode, of `totalMs` (the scenario and the settling after it). */
  readonly simulatedMs: number;
  readonly totalMs: number;
}

/** The scenario's requests in arrival order, with the epoch ms each arrives at. */
export async function arrivalsOf(
  scenario: Scenario,
  seed = scenario.seed,
): Promise<{ at: number; arrival: Arrival }[]> {
  const loop = new EventLoop();
  const start = Date.parse(scenario.start);
  const arrivals: { at: number; arrival: Arrival }[] = [];
  scheduleTraffic(scenario, loop, new Random(seed).fork("traffic"), (arrival) =>
    arrivals.push({ at: start + loop.now, arrival }),
  );
  await loop.run(scenario.duration);
  return arrivals;
}

export async function simulate(
  scenario: Scenario,
  options: SimulateOptions = {},
): Promise<SimulationReport> {
  const seed = options.seed ?? scenario.seed;
  const policy = simulatedPolicy(loadPolicy(scenario.policyPath));
  const overrides = checkedOverrides(
    options.overridesFile ?? "overrides",
    options.overrides ?? [],
    policy,
  );
  const modes: ModeReport[] = [];
  const failModes = scenario.failModes ?? [undefined];
  const runs = scenario.modes.flatMap((mode) => failModes.map((failMode) => ({ mode, failMode })));
  for (const [modeIndex, { mode, failMode }] of runs.entries()) {
    const onProgress = options.onProgress;
    const progress =
      onProgress === undefined
        ? undefined
        : (simulatedMs: number) =>
            onProgress({
              mode,
              modeIndex,
              modes: runs.length,
              simulatedMs,
              totalMs: scenario.duration + SETTLE_MS,
            });
    modes.push(await runMode(scenario, seed, mode, policy, overrides, options, progress, failMode));
  }
  return {
    scenario: scenario.name,
    seed,
    durationSeconds: scenario.duration / 1000,
    store: scenario.store.kind,
    replicas: scenario.store.kind === "dynamodb" ? scenario.store.replicas : [],
    deployment: scenario.deployment.kind,
    monthlyRequests: scenario.monthlyRequests,
    modes,
  };
}

/**
 * The policy as the simulator runs it (offline/policy.ts): a verified user arrives in the
 * headers the simulated traffic sets instead of a signed token, which the simulator would have
 * to sign and verify for every request for the same identity; the address is the socket peer,
 * as Lambda@Edge's `clientIp`.
 */
export function simulatedPolicy(policy: ResolvedPolicy): ResolvedPolicy {
  return offlinePolicy(policy, SIMULATED_USERS);
}

/**
 * The policy each mode runs. `hybrid` (and `hybrid+holder`, which differs in the store) sets every rule's counting to hybrid; this is the only
 * place that does (rules a policy may not make hybrid, token buckets, keep their counting).
 * `two-writes` has no time budget (the design waits for DynamoDB however long it takes) and
 * counts every IPv6 address apart, as its `IP#${ip}` key does.
 */
export function policyForMode(policy: ResolvedPolicy, mode: Mode): ResolvedPolicy {
  if (isHybridMode(mode)) {
    return {
      ...policy,
      rules: policy.rules.map(
        (rule): ResolvedRule =>
          // What a policy may not make hybrid (core/hybrid-counting.ts) stays as it is.
          rule.algorithm === "token-bucket" || rule.backend === "approximate"
            ? rule
            : { ...rule, counting: "hybrid" },
      ),
    };
  }
  if (mode === "two-writes") {
    return {
      ...policy,
      // The design keys by the whole address (`IP#${ip}`), IPv6 included.
      identity: { ...policy.identity, ip: { ...policy.identity.ip, ipv6Prefix: 128 } },
      budgetMs: 24 * 3_600_000,
      connectBudgetMs: 24 * 3_600_000,
    };
  }
  return policy;
}

/** Every rule that does not fail closed fails `failMode` (the `failClosed` paths stay closed). */
export function policyForFailMode(
  policy: ResolvedPolicy,
  failMode: "local" | "open" | undefined,
): ResolvedPolicy {
  if (failMode === undefined) return policy;
  return {
    ...policy,
    rules: policy.rules.map((rule) => (rule.failMode === "closed" ? rule : { ...rule, failMode })),
  };
}

async function runMode(
  scenario: Scenario,
  seed: number,
  mode: Mode,
  base: ResolvedPolicy,
  overrides: readonly Override[],
  options: SimulateOptions,
  progress: ((simulatedMs: number) => void) | undefined,
  failMode: "local" | "open" | undefined,
): Promise<ModeReport> {
  const random = new Random(seed);
  const loop = new EventLoop({ drainEach: options.drainEach });
  let accounting: Accounting | undefined;
  const world = new World(scenario, loop, random.fork("network"), (cost) =>
    accounting?.operation(cost),
  );
  const policy = policyForFailMode(policyForMode(base, mode), failMode);
  accounting = new Accounting(base, scenario.reportWindow, scenario.busyAbove, () => loop.now);
  const reference = new ReferenceEngine(base, overrides);
  const verdicts = new Map<Arrival, ReturnType<ReferenceEngine["decide"]>>();
  const tally = accounting;
  const waits = new WaitCauses(scenario.reportWindow, (region) =>
    world.baseRoundTrip(region, world.nearestReplica(region)),
  );
  const deployment = new Deployment(
    world,
    scenario,
    mode,
    policy,
    (served) => {
      const referenceDecision = verdicts.get(served.arrival);
      verdicts.delete(served.arrival);
      if (referenceDecision === undefined || referenceDecision instanceof Promise) return;
      const epochAt = world.clock() - served.decisionMs;
      tally.served(served, epochAt, referenceDecision.action === "allow", referenceDecision);
      if (served.arrival.legitimate) {
        const { decision } = served;
        const keys = decision.rules.map((rule) => `${rule.id}\u0000${decision.subject}`);
        waits.legitimate(
          served.arrival.region,
          served.process,
          decision.subject,
          keys,
          epochAt,
          served.decisionMs,
        );
      }
      options.onDecision?.(mode, served.arrival, served.decision, epochAt);
    },
    overrides,
  );
  scheduleTraffic(scenario, loop, random.fork("traffic"), (arrival) => {
    verdicts.set(arrival, reference.decide(arrival.request, world.clock()));
    deployment.handle(arrival);
  });
  await loop.run(scenario.duration + SETTLE_MS, progress);
  const lost = lostIncrements(world.model);
  const items = world.model?.itemCounts() ?? [];
  const ttlReplicatedDeletes = items.reduce(
    (sum, table) => sum + table.items * (table.replicas - 1),
    0,
  );
  const requests = tally.requests;
  const per = (value: number) => (requests === 0 ? 0 : value / requests);
  const over = tally.overAdmission();
  return {
    mode,
    ...(failMode === undefined ? {} : { failMode }),
    requests,
    admitted: tally.admitted,
    legitimate: {
      requests: tally.legitimateRequests,
      ...tally.legitimateOutcomes(),
      refusedWhereExactAdmitted: tally.legitimateRefusedWhereExactAdmitted,
    },
    attackers: { requests: tally.attackerRequests, admitted: tally.attackerAdmitted },
    overAdmission: over,
    store: {
      operations: tally.operations,
      readUnits: tally.readUnits,
      writeUnits: tally.writeUnits,
      replicatedWriteUnits: tally.replicatedWriteUnits,
      ttlReplicatedDeletes,
      perRequest: {
        operations: per(tally.operations),
        readUnits: per(tally.readUnits),
        writeUnits: per(tally.writeUnits),
        replicatedWriteUnits: per(tally.replicatedWriteUnits),
      },
      subjects: tally.subjectClasses(),
    },
    lostIncrements: lost,
    latencyMs: { p50: tally.latencyPercentile(0.5), p99: tally.latencyPercentile(0.99) },
    legitimateLatencyMs: {
      p50: tally.latencyPercentile(0.5, true),
      p99: tally.latencyPercentile(0.99, true),
      byRegion: tally.legitimateLatencyByRegion(),
    },
    legitimateWaits: waits.byRegion(),
    failedOpen: tally.failedOpen,
    failedClosed: tally.failedClosed,
    failedLocal: tally.failedLocal,
    blockedCached: tally.blockedCached,
    instances: { created: deployment.instancesCreated, coldStarts: tally.coldStarts },
    cost: costOf(scenario, tally, ttlReplicatedDeletes),
    timeline: tally.timeline(),
    loop: { events: loop.events, drains: loop.drains },
  };
}
