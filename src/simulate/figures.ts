/** The figures of a report, one row per figure and one column per mode: the text and HTML tables. */
import { count } from "../offline/text.js";
import { type ModeReport, modeLabel, type SimulationReport } from "./report.js";

type Line = readonly [label: string, value: (mode: ModeReport) => string];

export const fixed = (n: number, digits: number) => n.toFixed(digits);
export const percent = (share: number) => `${(share * 100).toFixed(1)}%`;
export const dollars = (n: number) => `$${n.toFixed(2)}`;

const LINES: readonly Line[] = [
  ["requests", (m) => count(m.requests)],
  ["admitted", (m) => count(m.admitted)],
  [
    "attacker requests admitted",
    (m) => `${count(m.attackers.admitted)} of ${count(m.attackers.requests)}`,
  ],
  ["over-admission, windows over the limit", (m) => count(m.overAdmission.contestedWindows)],
  ["  requests admitted beyond the limit", (m) => count(m.overAdmission.requests)],
  [
    "  mean / p99 / max, share of the limit",
    (m) =>
      `${percent(m.overAdmission.meanShare)} / ${percent(m.overAdmission.p99Share)} / ${percent(m.overAdmission.maxShare)}`,
  ],
  [
    "legit refused while under their limit",
    (m) => `${count(m.legitimate.refusedUnderLimit)} of ${count(m.legitimate.underLimitRequests)}`,
  ],
  [
    "  at their limit: short of exact, mean / max",
    (m) =>
      `${percent(m.legitimate.atLimit.meanShortfall)} / ${percent(m.legitimate.atLimit.maxShortfall)}`,
  ],
  ["store operations per request", (m) => fixed(m.store.perRequest.operations, 4)],
  [
    "  read / write / replicated write units",
    (m) =>
      `${fixed(m.store.perRequest.readUnits, 3)} / ${fixed(m.store.perRequest.writeUnits, 3)} / ${fixed(m.store.perRequest.replicatedWriteUnits, 3)}`,
  ],
  [
    "  busy subjects (> limit/window): per request",
    (m) => fixed(m.store.subjects.busy.operationsPerRequest, 4),
  ],
  [
    "  busy subjects: max per subject-window",
    (m) => fixed(m.store.subjects.busy.maxOperationsPerRequest, 4),
  ],
  ["  other subjects: per request", (m) => fixed(m.store.subjects.others.operationsPerRequest, 4)],
  [
    "lost increments (of those counted)",
    (m) =>
      `${count(m.lostIncrements.lost)} of ${count(m.lostIncrements.counted)} (${percent(m.lostIncrements.share)})`,
  ],
  [
    "decision latency p50 / p99, ms",
    (m) => `${fixed(m.latencyMs.p50, 1)} / ${fixed(m.latencyMs.p99, 1)}`,
  ],
  [
    "  legitimate requests only",
    (m) => `${fixed(m.legitimateLatencyMs.p50, 1)} / ${fixed(m.legitimateLatencyMs.p99, 1)}`,
  ],
  [
    "failed open / counted locally / failed closed",
    (m) => `${count(m.failedOpen)} / ${count(m.failedLocal)} / ${count(m.failedClosed)}`,
  ],
  ["answered by the block cache", (m) => count(m.blockedCached)],
  [
    "instances created (cold starts)",
    (m) => `${count(m.instances.created)} (${count(m.instances.coldStarts)})`,
  ],
  ["monthly: DynamoDB write units", (m) => count(m.cost.writeUnits)],
  ["monthly: replicated write units (TTL incl.)", (m) => count(m.cost.replicatedWriteUnits)],
  ["monthly: read units", (m) => count(m.cost.readUnits)],
  ["monthly: DynamoDB / Redis", (m) => `${dollars(m.cost.dynamodb)} / ${dollars(m.cost.redis)}`],
  ["monthly: Lambda@Edge", (m) => dollars(m.cost.lambdaEdge)],
  ["monthly: total", (m) => dollars(m.cost.total)],
];

/** The header row (the modes) and a row per figure; `busyAbove` names the busy subjects. */
export function figureRows(report: SimulationReport, busyAbove: number): string[][] {
  const rows = [["", ...report.modes.map((mode) => modeLabel(mode, report))]];
  for (const [label, value] of LINES) {
    rows.push([label.replace("> limit", `> ${busyAbove}`), ...report.modes.map(value)]);
    if (label === "  legitimate requests only") {
      rows.push(...byRegionRows(report));
      rows.push(...waitRows(report));
    }
  }
  return rows;
}

/** Legitimate decisions' p50 / p99 in each region: the far region is where a wait shows. */
function byRegionRows(report: SimulationReport): string[][] {
  const regions = [
    ...new Set(report.modes.flatMap((mode) => Object.keys(mode.legitimateLatencyMs.byRegion))),
  ].sort();
  return regions.map((region) => [
    `    in ${region}`,
    ...report.modes.map((mode) => {
      const figures = mode.legitimateLatencyMs.byRegion[region];
      return figures === undefined ? "-" : `${fixed(figures.p50, 1)} / ${fixed(figures.p99, 1)}`;
    }),
  ]);
}

/**
 * Legitimate decisions that waited beyond the region's own store, in each region, and why
 * (waits.ts): held units ran out / seen by the process the window before / seen by another
 * process of the region / new to the region.
 */
function waitRows(report: SimulationReport): string[][] {
  const regions = [
    ...new Set(report.modes.flatMap((mode) => Object.keys(mode.legitimateWaits))),
  ].sort();
  const rows: string[][] = [];
  if (regions.length > 0) {
    rows.push([
      "  waited beyond the region's store (ran out / here before / region / new)",
      ...report.modes.map(() => ""),
    ]);
  }
  for (const region of regions) {
    rows.push([
      `    in ${region}`,
      ...report.modes.map((mode) => {
        const w = mode.legitimateWaits[region];
        if (w === undefined) return "-";
        return `${count(w.waited)} of ${count(w.requests)} (${count(w.heldRanOut)} / ${count(w.seenHereWindowBefore)} / ${count(w.seenInRegion)} / ${count(w.newInRegion)})`;
      }),
    ]);
  }
  return rows;
}
