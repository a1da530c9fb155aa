/**
 * How large a scenario is, estimated before it runs, and the bounds beyond which simulate
 * refuses it (docs/accuracy.md, "Limits of the model"): a scenario past them would run out of
 * memory (200,000,000 clients grew to 2 GB and died with no message) or take days.
 */
import type { Scenario } from "./scenario-schema.js";

/** Every legitimate client is a pending arrival from the start: about 250 bytes each, held. */
export const MAX_CLIENTS = 1_000_000;
/**
 * Subject-windows (a subject's requests in one report window) are what the accounting, the
 * memory stores and the table model keep for the whole run: about 2 KB each on a memory store,
 * up to 11 KB on a four-replica global table (docs/accuracy.md has the measurements).
 */
export const MAX_SUBJECT_WINDOWS = 1_000_000;
/** Requests per mode: at the simulator's pace (bench/simulate.bench.ts), some 20 minutes each. */
export const MAX_REQUESTS_PER_MODE = 100_000_000;

export interface ScenarioSize {
  readonly clients: number;
  /** Requests one mode simulates: every source's mean rate over its time. */
  readonly requests: number;
  /** Distinct subjects in each report window, summed over the windows. */
  readonly subjectWindows: number;
}

export function estimatedSize(scenario: Scenario): ScenarioSize {
  const minutes = scenario.duration / 60_000;
  const windows = Math.ceil(scenario.duration / scenario.reportWindow);
  let clients = 0;
  let requests = 0;
  let subjectWindows = 0;
  for (const group of scenario.traffic.legitimate) {
    const { median, sigma } = group.requestsPerMinute;
    const sent = group.clients * median * Math.exp((sigma * sigma) / 2) * minutes;
    clients += group.clients;
    requests += sent;
    subjectWindows += Math.min(group.clients * windows, sent);
  }
  for (const attacker of scenario.traffic.attackers) {
    const until = Math.min(scenario.duration, attacker.until ?? scenario.duration);
    const seconds = Math.max(0, until - attacker.from) / 1000;
    const regions = attacker.kind === "spread" ? 1 : attacker.regions.length;
    const sent = attacker.requestsPerSecond * seconds * regions;
    const subjects =
      attacker.kind === "ipv6-rotation"
        ? sent
        : attacker.kind === "botnet"
          ? attacker.addresses
          : 1;
    requests += sent;
    subjectWindows += Math.min(subjects * windows, sent);
  }
  return { clients, requests: Math.round(requests), subjectWindows: Math.round(subjectWindows) };
}

/** What makes a scenario too large to run, each naming its bound; empty when it fits. */
export function sizeProblems(scenario: Scenario): string[] {
  const size = estimatedSize(scenario);
  const n = (value: number) => value.toLocaleString("en-US");
  const problems: string[] = [];
  if (size.clients > MAX_CLIENTS) {
    problems.push(
      `traffic.legitimate: ${n(size.clients)} clients in all; simulate holds every client from the start and takes at most ${n(MAX_CLIENTS)}: model the same load with fewer clients and a higher requestsPerMinute`,
    );
  }
  if (size.subjectWindows > MAX_SUBJECT_WINDOWS) {
    problems.push(
      `traffic: about ${n(size.subjectWindows)} subject-windows (distinct subjects in each ${scenario.reportWindow / 1000} s report window, summed); simulate keeps each for the whole run and takes at most ${n(MAX_SUBJECT_WINDOWS)}: shorten duration, or lower clients, addresses or ipv6-rotation's rate`,
    );
  }
  if (size.requests > MAX_REQUESTS_PER_MODE) {
    problems.push(
      `traffic: about ${n(size.requests)} requests per mode (rates over duration); simulate runs at most ${n(MAX_REQUESTS_PER_MODE)}: shorten duration or lower the rates`,
    );
  }
  return problems;
}
