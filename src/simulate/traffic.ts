/**
 * The scenario's traffic as arrivals on the event loop: legitimate clients, each with its own
 * rate, region and identity, and attackers (seed document 000's scraper, the same spread over regions,
 * address rotation inside one IPv6 /64, a botnet under the limit per address). Every source
 * draws from its own seeded generator, so the same scenario and seed give the same arrivals in
 * every mode.
 */
import type { RequestDescription } from "../core/types.js";
import type { EventLoop } from "./event-loop.js";
import type { Random } from "./random.js";
import type { Scenario } from "./scenario.js";

export interface Arrival {
  readonly region: string;
  readonly request: RequestDescription;
  /** Legitimate (a client whose refusals under its limit are counted) or an attacker. */
  readonly legitimate: boolean;
  /** The traffic group (`legitimate.0`, `scraper`), for the report. */
  readonly group: string;
}

/** The headers a trusted layer sets for a simulated user (offline/policy.ts). */
export const SIMULATED_USERS = { user: "x-user-id", plan: "x-user-plan" } as const;

export function scheduleTraffic(
  scenario: Scenario,
  loop: EventLoop,
  random: Random,
  emit: (arrival: Arrival) => void,
): void {
  const end = scenario.duration;
  const regionNames = Object.keys(scenario.regions);
  const regionWeights = regionNames.map((name) => scenario.regions[name]?.weight ?? 1);

  scenario.traffic.legitimate.forEach((group, g) => {
    const rng = random.fork(`legitimate.${g}`);
    const label = group.name ?? `legitimate.${g}`;
    const names = group.regions === undefined ? regionNames : Object.keys(group.regions);
    const weights = group.regions === undefined ? regionWeights : Object.values(group.regions);
    const paths = Object.keys(group.paths);
    const pathWeights = Object.values(group.paths);
    for (let c = 0; c < group.clients; c++) {
      const region = names[rng.weighted(weights)] as string;
      const perMinute = rng.logNormal(
        group.requestsPerMinute.median,
        group.requestsPerMinute.sigma,
      );
      const gapMs = 60_000 / perMinute;
      const ip = legitimateAddress(g, c);
      const headers: Record<string, string> =
        group.tier === "authenticated"
          ? {
              [SIMULATED_USERS.user]: `u_${g}_${c}`,
              ...(group.plan === undefined ? {} : { [SIMULATED_USERS.plan]: group.plan }),
            }
          : {};
      const next = (at: number): void => {
        if (at >= end) return;
        loop.at(at, () => {
          const path = paths[rng.weighted(pathWeights)] as string;
          emit({
            region,
            legitimate: true,
            group: label,
            request: { ip, method: "GET", path, headers, lowerCaseHeaders: true },
          });
          next(at + gap(rng, group.arrival, gapMs));
        });
      };
      next(rng.next() * gapMs);
    }
  });

  scenario.traffic.attackers.forEach((attacker, a) => {
    const rng = random.fork(`attacker.${a}`);
    const label = attacker.name ?? attacker.kind;
    const until = Math.min(end, attacker.until ?? end);
    // A spread attacker's rate is shared by its regions; the others send from each region listed.
    const perRegion =
      attacker.kind === "spread"
        ? attacker.requestsPerSecond / attacker.regions.length
        : attacker.requestsPerSecond;
    attacker.regions.forEach((region, r) => {
      const gapMs = 1000 / perRegion;
      let sent = 0;
      const next = (at: number): void => {
        if (at >= until) return;
        loop.at(at, () => {
          const ip = attackerAddress(attacker.kind, a, attacker.addresses, sent++, rng);
          emit({
            region,
            legitimate: false,
            group: label,
            request: {
              ip,
              method: "GET",
              path: attacker.path,
              headers: {},
              lowerCaseHeaders: true,
            },
          });
          next(at + gap(rng, attacker.arrival, gapMs));
        });
      };
      next(attacker.from + (gapMs * r) / attacker.regions.length);
    });
  });
}

function gap(rng: Random, arrival: "poisson" | "fixed", meanMs: number): number {
  return arrival === "fixed" ? meanMs : rng.exponential(meanMs);
}

/** Legitimate clients live in 198.18.0.0/15 (the benchmarking range): one address each. */
function legitimateAddress(group: number, client: number): string {
  const n = group * 20_000 + client;
  return `198.${18 + ((n >> 16) & 1)}.${(n >> 8) & 255}.${n & 255}`;
}

function attackerAddress(
  kind: string,
  attacker: number,
  addresses: number,
  sent: number,
  rng: Random,
): string {
  if (kind === "ipv6-rotation") {
    const part = () => rng.int(0x10000).toString(16);
    return `2001:db8:${attacker.toString(16)}:1:${part()}:${part()}:${part()}:${part()}`;
  }
  if (kind === "botnet") {
    const n = sent % addresses;
    return `100.${64 + ((n >> 16) & 63)}.${(n >> 8) & 255}.${n & 255}`;
  }
  return `203.0.113.${(7 + attacker) & 255}`;
}
