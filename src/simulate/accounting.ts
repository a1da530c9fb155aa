/**
 * What one mode's run measured. Definitions (docs/accuracy.md says them in words):
 *
 * - Over-admission, per subject, rule and window: requests the mode admitted beyond the bound,
 *   where windows are the rule's length aligned to the epoch and the bound is the rule's limit
 *   (exact fixed and sliding windows never admit more than that in an aligned window), or for a
 *   token bucket what the exact reference admitted in that window when that is more (a bucket
 *   legitimately admits a burst and its refill in one window). Shares are of the limit; mean,
 *   p99 and max are over the windows where the subject attempted more than the limit. The
 *   subject is the policy's (the reference's), whatever the mode keys by.
 * - The exact reference: the same policy decided at arrival by one engine on one memory store,
 *   with no network: exact counting of each client alone. A legitimate client is under its
 *   limit in a report window when the reference refused none of its requests there; the mode's
 *   refusals in those client-windows are the legitimate requests refused while under their
 *   limit. Where the reference did refuse (a client at its limit), the shortfall is what the
 *   reference admitted beyond what the mode admitted, per rule and window, as a share of the
 *   limit: capacity held by processes that did not use it (hybrid counting).
 * - Store operations are attributed to the subject whose key they touch, per report window.
 */
import type { Decision } from "../core/decision.js";
import type { ResolvedPolicy } from "../core/model.js";
import type { Served } from "./deployment.js";
import type { OperationCost, TableModel } from "./dynamodb-model/model.js";

interface CounterTally {
  readonly limit: number;
  readonly tokenBucket: boolean;
  readonly legitimate: boolean;
  attempts: number;
  admitted: number;
  reference: number;
}

interface SubjectWindow {
  requests: number;
  operations: number;
}

/** A legitimate client's requests in one report window, by what the mode and the reference did. */
interface ClientWindow {
  requests: number;
  refused: number;
  referenceRefused: number;
}

export interface Timeline {
  readonly minute: number;
  readonly requests: number;
  readonly legitimateAdmitted: number;
  readonly attackerAdmitted: number;
  readonly operations: number;
}

const LATENCY_BUCKET_MS = 0.1;
const LATENCY_BUCKETS = 100_000;

export class Accounting {
  readonly #policy: ResolvedPolicy;
  readonly #reportWindowMs: number;
  readonly #busyAbove: number;
  readonly #counters = new Map<string, CounterTally>();
  readonly #subjects = new Map<string, SubjectWindow>();
  readonly #clients = new Map<string, ClientWindow>();
  readonly #latency = new Uint32Array(LATENCY_BUCKETS + 1);
  /** Legitimate requests' decisions only (an attack's blocked-cached answers take no time). */
  readonly #legitimateLatency = new Uint32Array(LATENCY_BUCKETS + 1);
  /**
   * The same by the region the request arrived in: a p99 over every region hides the region
   * far from where a store or lease lives.
   */
  readonly #legitimateLatencyByRegion = new Map<
    string,
    { histogram: Uint32Array; requests: number }
  >();
  readonly #timeline = new Map<
    number,
    { requests: number; legitimateAdmitted: number; attackerAdmitted: number; operations: number }
  >();
  readonly #now: () => number;
  requests = 0;
  admitted = 0;
  legitimateRequests = 0;
  legitimateRefusedWhereExactAdmitted = 0;
  attackerRequests = 0;
  attackerAdmitted = 0;
  failedOpen = 0;
  failedClosed = 0;
  failedLocal = 0;
  blockedCached = 0;
  coldStarts = 0;
  readUnits = 0;
  writeUnits = 0;
  replicatedWriteUnits = 0;
  operations = 0;
  /** Sum of arrival-to-decision time, ms (Lambda@Edge duration). */
  busyMs = 0;

  constructor(
    policy: ResolvedPolicy,
    reportWindowMs: number,
    busyAbove: number,
    now: () => number,
  ) {
    this.#policy = policy;
    this.#reportWindowMs = reportWindowMs;
    this.#busyAbove = busyAbove;
    this.#now = now;
  }

  /** `epochAt`: the engine's clock when the decision started; `referenceAdmitted`: the reference's verdict. */
  served(served: Served, epochAt: number, referenceAdmitted: boolean, reference: Decision): void {
    const { decision, arrival } = served;
    const admitted = decision.action === "allow";
    this.requests++;
    if (admitted) this.admitted++;
    if (arrival.legitimate) {
      this.legitimateRequests++;
      if (!admitted && referenceAdmitted) this.legitimateRefusedWhereExactAdmitted++;
      const id = `${reference.subject}\u0000${Math.floor(epochAt / this.#reportWindowMs)}`;
      let client = this.#clients.get(id);
      if (client === undefined) {
        client = { requests: 0, refused: 0, referenceRefused: 0 };
        this.#clients.set(id, client);
      }
      client.requests++;
      if (!admitted) client.refused++;
      if (!referenceAdmitted) client.referenceRefused++;
    } else {
      this.attackerRequests++;
      if (admitted) this.attackerAdmitted++;
    }
    if (decision.reason === "store-failed-open") this.failedOpen++;
    else if (decision.reason === "store-failed-closed") this.failedClosed++;
    else if (decision.reason === "store-failed-local") this.failedLocal++;
    else if (decision.reason === "blocked-cached") this.blockedCached++;
    if (served.coldStart) this.coldStarts++;
    this.busyMs += served.latencyMs;
    const bucket = Math.min(LATENCY_BUCKETS, Math.round(served.decisionMs / LATENCY_BUCKET_MS));
    this.#latency[bucket] = (this.#latency[bucket] as number) + 1;
    if (arrival.legitimate) {
      this.#legitimateLatency[bucket] = (this.#legitimateLatency[bucket] as number) + 1;
      let region = this.#legitimateLatencyByRegion.get(arrival.region);
      if (region === undefined) {
        region = { histogram: new Uint32Array(LATENCY_BUCKETS + 1), requests: 0 };
        this.#legitimateLatencyByRegion.set(arrival.region, region);
      }
      region.histogram[bucket] = (region.histogram[bucket] as number) + 1;
      region.requests++;
    }

    // The reference matched the same rules (same policy, same identity).
    for (const rule of reference.rules) {
      if (rule.shadow || !("ms" in rule.window)) continue;
      // The subject as the policy counts it (two-writes counts each IPv6 address apart).
      const id = counterWindowKey(rule.id, reference.subject, Math.floor(epochAt / rule.window.ms));
      let tally = this.#counters.get(id);
      if (tally === undefined) {
        tally = {
          limit: rule.limit,
          tokenBucket: rule.algorithm === "token-bucket",
          legitimate: arrival.legitimate,
          attempts: 0,
          admitted: 0,
          reference: 0,
        };
        this.#counters.set(id, tally);
      }
      tally.attempts++;
      if (admitted) tally.admitted++;
      if (referenceAdmitted) tally.reference++;
    }
    // Store calls are attributed by the keys the mode writes: requests by the mode's subject too.
    const window = Math.floor(this.#now() / this.#reportWindowMs);
    this.#subjectWindow(decision.subject, window).requests++;
    const minute = this.#minute();
    minute.requests++;
    if (admitted) {
      if (arrival.legitimate) minute.legitimateAdmitted++;
      else minute.attackerAdmitted++;
    }
  }

  operation(cost: OperationCost): void {
    this.readUnits += cost.readUnits;
    this.writeUnits += cost.writeUnits;
    this.replicatedWriteUnits += cost.replicatedWriteUnits;
    this.operations++;
    const bar = cost.pk.indexOf("|");
    const subject = bar < 0 ? cost.pk : cost.pk.slice(0, bar);
    this.#subjectWindow(subject, Math.floor(this.#now() / this.#reportWindowMs)).operations++;
    this.#minute().operations++;
  }

  #subjectWindow(subject: string, window: number): SubjectWindow {
    const id = `${subject}\u0000${window}`;
    let found = this.#subjects.get(id);
    if (found === undefined) {
      found = { requests: 0, operations: 0 };
      this.#subjects.set(id, found);
    }
    return found;
  }

  #minute() {
    const minute = Math.floor(this.#now() / 60_000);
    let found = this.#timeline.get(minute);
    if (found === undefined) {
      found = { requests: 0, legitimateAdmitted: 0, attackerAdmitted: 0, operations: 0 };
      this.#timeline.set(minute, found);
    }
    return found;
  }

  /** Legitimate clients under their limit (by the reference), and the shortfall of those at it. */
  legitimateOutcomes() {
    let underRequests = 0;
    let underRefused = 0;
    for (const client of this.#clients.values()) {
      if (client.referenceRefused > 0) continue;
      underRequests += client.requests;
      underRefused += client.refused;
    }
    const shortfalls: number[] = [];
    let worst: { share: number; key: string; tally: CounterTally } | undefined;
    for (const [key, tally] of this.#counters) {
      if (!tally.legitimate || tally.reference === tally.attempts || tally.limit === 0) continue;
      const share = Math.max(0, tally.reference - tally.admitted) / tally.limit;
      shortfalls.push(share);
      if (worst === undefined || share > worst.share) worst = { share, key, tally };
    }
    return {
      underLimitRequests: underRequests,
      refusedUnderLimit: underRefused,
      atLimit: {
        windows: shortfalls.length,
        meanShortfall:
          shortfalls.length === 0
            ? 0
            : shortfalls.reduce((sum, x) => sum + x, 0) / shortfalls.length,
        maxShortfall: worst?.share ?? 0,
        worst:
          worst === undefined
            ? null
            : {
                ...counterWindowOf(worst.key),
                admitted: worst.tally.admitted,
                reference: worst.tally.reference,
                limit: worst.tally.limit,
              },
      },
    };
  }

  overAdmission() {
    const shares: number[] = [];
    let requests = 0;
    let worst: { share: number; key: string; admitted: number; limit: number } | undefined;
    for (const [key, tally] of this.#counters) {
      if (tally.attempts <= tally.limit) continue;
      const bound = tally.tokenBucket ? Math.max(tally.limit, tally.reference) : tally.limit;
      const over = Math.max(0, tally.admitted - bound);
      const share = over / tally.limit;
      shares.push(share);
      requests += over;
      if (worst === undefined || share > worst.share)
        worst = { share, key, admitted: tally.admitted, limit: tally.limit };
    }
    shares.sort((a, b) => a - b);
    return {
      contestedWindows: shares.length,
      requests,
      meanShare: shares.length === 0 ? 0 : shares.reduce((sum, x) => sum + x, 0) / shares.length,
      p99Share: percentileOf(shares, 0.99),
      maxShare: worst?.share ?? 0,
      worst:
        worst === undefined
          ? null
          : { ...counterWindowOf(worst.key), admitted: worst.admitted, limit: worst.limit },
    };
  }

  subjectClasses() {
    let busyWindows = 0;
    let busyRequests = 0;
    let busyOperations = 0;
    let busyMax = 0;
    let busyMaxSubject: string | null = null;
    let otherRequests = 0;
    let otherOperations = 0;
    for (const [id, window] of this.#subjects) {
      if (window.requests > this.#busyAbove) {
        busyWindows++;
        busyRequests += window.requests;
        busyOperations += window.operations;
        const ratio = window.operations / window.requests;
        if (ratio > busyMax) {
          busyMax = ratio;
          busyMaxSubject = id.split("\u0000")[0] as string;
        }
      } else {
        otherRequests += window.requests;
        otherOperations += window.operations;
      }
    }
    return {
      busy: {
        subjectWindows: busyWindows,
        operationsPerRequest: busyRequests === 0 ? 0 : busyOperations / busyRequests,
        maxOperationsPerRequest: busyMax,
        maxSubject: busyMaxSubject,
      },
      others: { operationsPerRequest: otherRequests === 0 ? 0 : otherOperations / otherRequests },
    };
  }

  /** Decision latency at `share` (0.5, 0.99), ms, of every request or of legitimate ones. */
  latencyPercentile(share: number, legitimateOnly = false): number {
    const histogram = legitimateOnly ? this.#legitimateLatency : this.#latency;
    return percentileOfHistogram(
      histogram,
      legitimateOnly ? this.legitimateRequests : this.requests,
      share,
    );
  }

  /** Legitimate decisions' p50 and p99, ms, per region they arrived in (sorted by name). */
  legitimateLatencyByRegion(): Record<string, { p50: number; p99: number }> {
    const byRegion: Record<string, { p50: number; p99: number }> = {};
    for (const name of [...this.#legitimateLatencyByRegion.keys()].sort()) {
      const { histogram, requests } = this.#legitimateLatencyByRegion.get(name) as {
        histogram: Uint32Array;
        requests: number;
      };
      byRegion[name] = {
        p50: percentileOfHistogram(histogram, requests, 0.5),
        p99: percentileOfHistogram(histogram, requests, 0.99),
      };
    }
    return byRegion;
  }

  timeline(): Timeline[] {
    return [...this.#timeline.entries()]
      .sort((a, b) => a[0] - b[0])
      .map(([minute, values]) => ({ minute, ...values }));
  }

  get policy(): ResolvedPolicy {
    return this.#policy;
  }
}

/** Increments counted against what the settled items hold (lost to last-writer-wins). */
export function lostIncrements(model: TableModel | undefined) {
  const { counted, stored, lost } = model?.incrementTotals() ?? { counted: 0, stored: 0, lost: 0 };
  return { counted, stored, lost, share: counted === 0 ? 0 : lost / counted };
}

/** The bucket (ms) at which `share` of `total` decisions in `histogram` had been decided. */
function percentileOfHistogram(histogram: Uint32Array, total: number, share: number): number {
  const target = Math.ceil(total * share);
  let seen = 0;
  for (let i = 0; i <= LATENCY_BUCKETS; i++) {
    seen += histogram[i] as number;
    if (seen >= target && seen > 0) return i * LATENCY_BUCKET_MS;
  }
  return 0;
}

function percentileOf(sorted: readonly number[], share: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * share) - 1)] as number;
}

/**
 * The key of a counter's tally in one window: its rule, subject and window index
 * (`counterWindowOf` reads them back).
 */
function counterWindowKey(rule: string, subject: string, window: number): string {
  return `${rule}\u0000${subject}\u0000${window}`;
}

function counterWindowOf(key: string): { rule: string; subject: string; window: number } {
  const [rule = "", subject = "", window = ""] = key.split("\u0000");
  return { rule, subject, window: Number(window) };
}
