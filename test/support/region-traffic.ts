/**
 * Traffic over the limiters of several regions, in real time: one attacker spread over every
 * region and every limiter in turn, and legitimate subjects that each stay in one region (as
 * nearly every real client does), one request every so often, to the region's limiters in turn
 * (a load balancer's choice). What comes back is what the real-process tests assert and
 * bench/regions.bench.ts prints: the attacker's admissions per window, and each region's
 * legitimate decision times.
 *
 * An admission belongs to the window its rule's counter says it was counted in (`resetAt`),
 * not to the moment it was sent: a request sent just before a window's end may be counted in
 * the next, by the store or by a reservation held for it.
 */
import type { Limiter, Verdict } from "../../src/limiter.js";

export interface RegionFleet {
  readonly region: string;
  /** The region's processes (gateways, instances), each its own limiter and store client. */
  readonly limiters: readonly Limiter[];
}

export interface TrafficOptions {
  readonly fleets: readonly RegionFleet[];
  readonly durationMs: number;
  /** The rule's window: admissions are grouped by it. */
  readonly windowMs: number;
  /** One subject spread over every region and limiter, `perSecond` requests in all. */
  readonly attack?: { readonly ip: string; readonly perSecond: number } | undefined;
  /**
   * Subjects that stay in one region, `perRegion` of them, one request every `everyMs` each;
   * their addresses are `10.<subnet + region>.x.y` (runs side by side take different subnets).
   */
  readonly legit?:
    | { readonly perRegion: number; readonly everyMs: number; readonly subnet?: number }
    | undefined;
}

export interface RegionFigures {
  sent: number;
  refused: number;
  /** Decision times, ms. */
  readonly latencies: number[];
}

export interface TrafficResult {
  readonly attack: {
    sent: number;
    /** Admissions by window index (epoch ms / window), in order. */
    readonly admittedByWindow: Map<number, number>;
    /** Of those, the admissions counted in the process (`store-failed-local`), not in the store. */
    readonly localByWindow: Map<number, number>;
    /** Decisions by reason (`within-limit`, `store-failed-local`...). */
    readonly reasons: Map<string, number>;
  };
  /** By region. */
  readonly legit: Map<string, RegionFigures>;
}

/** The window an admission was counted in. */
export function windowOf(verdict: Verdict, windowMs: number, sentAt: number): number {
  const resetAt = verdict.outcomes[0]?.state.resetAt ?? 0;
  return resetAt > 0 ? Math.floor((resetAt - 1) / windowMs) : Math.floor(sentAt / windowMs);
}

export async function runTraffic(options: TrafficOptions): Promise<TrafficResult> {
  const result: TrafficResult = {
    attack: { sent: 0, admittedByWindow: new Map(), localByWindow: new Map(), reasons: new Map() },
    legit: new Map(
      options.fleets.map(({ region }) => [region, { sent: 0, refused: 0, latencies: [] }]),
    ),
  };
  const inFlight = new Set<Promise<void>>();
  const track = (pending: Promise<void>): void => {
    inFlight.add(pending);
    pending.finally(() => inFlight.delete(pending));
  };
  const timers: NodeJS.Timeout[] = [];
  const attack = options.attack;
  if (attack !== undefined) {
    const all = options.fleets.flatMap(({ limiters }, r) =>
      // Region by region in turn, each region's limiters in turn: spread evenly over both.
      limiters.map((limiter, l) => ({ limiter, order: l * options.fleets.length + r })),
    );
    all.sort((a, b) => a.order - b.order);
    let next = 0;
    const fire = (): void => {
      const { limiter } = all[next++ % all.length] as (typeof all)[number];
      result.attack.sent++;
      const sentAt = Date.now();
      track(
        limiter.check({ ip: attack.ip, path: "/" }).then((verdict) => {
          const reasons = result.attack.reasons;
          reasons.set(verdict.reason, (reasons.get(verdict.reason) ?? 0) + 1);
          if (verdict.action !== "allow") return;
          const window = windowOf(verdict, options.windowMs, sentAt);
          const admitted = result.attack.admittedByWindow;
          admitted.set(window, (admitted.get(window) ?? 0) + 1);
          if (verdict.reason !== "store-failed-local") return;
          const local = result.attack.localByWindow;
          local.set(window, (local.get(window) ?? 0) + 1);
        }),
      );
    };
    const started = performance.now();
    // Timers run late on a busy machine: each tick sends what is due by now, so the rate holds.
    timers.push(
      setInterval(
        () => {
          const due = Math.floor(((performance.now() - started) * attack.perSecond) / 1000);
          while (result.attack.sent < due) fire();
        },
        Math.max(1, 1000 / attack.perSecond),
      ),
    );
  }
  const legit = options.legit;
  if (legit !== undefined) {
    options.fleets.forEach(({ region, limiters }, r) => {
      const figures = result.legit.get(region) as RegionFigures;
      for (let s = 0; s < legit.perRegion; s++) {
        const ip = `10.${(legit.subnet ?? 0) + r + 1}.${Math.floor(s / 250)}.${(s % 250) + 1}`;
        let sent = 0;
        const send = (): void => {
          const limiter = limiters[(s + sent++) % limiters.length] as Limiter;
          figures.sent++;
          const started = performance.now();
          track(
            limiter.check({ ip, path: "/" }).then((verdict) => {
              figures.latencies.push(performance.now() - started);
              if (verdict.action !== "allow") figures.refused++;
            }),
          );
        };
        // Spread over the interval, so that the subjects do not all ask at once.
        const phase = (s * legit.everyMs) / legit.perRegion;
        timers.push(
          setTimeout(() => {
            send();
            timers.push(setInterval(send, legit.everyMs));
          }, phase),
        );
      }
    });
  }
  await new Promise((resolve) => setTimeout(resolve, options.durationMs));
  for (const timer of timers) clearTimeout(timer);
  while (inFlight.size > 0) await Promise.all(inFlight);
  return result;
}

/** The `share` percentile (0.99) of `values`, nearest rank; 0 when there are none. */
export function percentile(values: readonly number[], share: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(share * sorted.length) - 1)] as number;
}

/** A run in words: admissions per window, the decisions' reasons, each region's latency. */
export function describeTraffic(name: string, result: TrafficResult): string {
  const windows = [...result.attack.admittedByWindow.values()].join(", ");
  const reasons = [...result.attack.reasons].map(([reason, n]) => `${reason} ${n}`).join(", ");
  const lines = [
    `${name}: attacker admitted per window [${windows}] of ${result.attack.sent} (${reasons})`,
  ];
  for (const [region, figures] of result.legit) {
    if (figures.sent === 0) continue;
    const p = (share: number) => percentile(figures.latencies, share).toFixed(1);
    lines.push(
      `  legitimate in ${region}: p50 ${p(0.5)} ms, p90 ${p(0.9)} ms, p99 ${p(0.99)} ms (${figures.sent} sent, ${figures.refused} refused)`,
    );
  }
  return lines.join("\n");
}
