/**
 * `--html FILE`: one self-contained page with the modes side by side: a bar per mode for each
 * headline figure, what was admitted and what the store was asked each minute, and every
 * figure in a table. Drawn like every chart of the project (charts/uplot.ts).
 */
import { type ChartFiles, type ChartSpec, uplotFiles } from "../charts/uplot.js";
import { escapeHtml } from "../html.js";
import { chartPlace, htmlTable, type PageChart, reportPage } from "../offline/html.js";
import type { Timeline } from "./accounting.js";
import { figureRows } from "./figures.js";
import { type ModeReport, modeLabel, type SimulationReport } from "./report.js";

const COLORS = ["#c0392b", "#2471a3", "#239b56", "#b9770e", "#7d3c98"];

function color(index: number): string {
  return COLORS[index % COLORS.length] as string;
}

/** One bar per mode: one series per mode, so the legend names and colours them. */
function bars(
  modes: readonly ModeReport[],
  label: (mode: ModeReport) => string,
  title: string,
  yLabel: string,
  value: (mode: ModeReport) => number,
): ChartSpec {
  return {
    title,
    x: modes.map((_, i) => i),
    axis: "categories",
    categories: modes.map(label),
    yLabel,
    width: 420,
    height: 240,
    series: modes.map((mode, i) => ({
      label: label(mode),
      color: color(i),
      values: modes.map((_, j) => (i === j ? value(mode) : null)),
    })),
  };
}

/** A line per mode over the simulated minutes. */
function perMinute(
  modes: readonly ModeReport[],
  label: (mode: ModeReport) => string,
  title: string,
  yLabel: string,
  value: (minute: Timeline) => number,
): ChartSpec {
  const minutes = [...new Set(modes.flatMap((mode) => mode.timeline.map((m) => m.minute)))].sort(
    (a, b) => a - b,
  );
  return {
    title,
    x: minutes,
    axis: "number",
    xLabel: "simulated minute",
    yLabel,
    width: 640,
    series: modes.map((mode, i) => {
      const byMinute = new Map(mode.timeline.map((m) => [m.minute, value(m)]));
      return {
        label: label(mode),
        color: color(i),
        values: minutes.map((minute) => byMinute.get(minute) ?? null),
      };
    }),
  };
}

/** The headline figures, a bar per mode: where each chart goes, its title, unit and value. */
const FIGURES: readonly (readonly [string, string, string, (mode: ModeReport) => number])[] = [
  [
    "chart-over",
    "Over-admission: max beyond the limit",
    "% of the limit",
    (m) => m.overAdmission.maxShare * 100,
  ],
  ["chart-lost", "Lost increments", "% of those counted", (m) => m.lostIncrements.share * 100],
  [
    "chart-operations",
    "Store operations per request",
    "operations",
    (m) => m.store.perRequest.operations,
  ],
  [
    "chart-busy",
    "Store operations per request, busiest subject-window",
    "operations",
    (m) => m.store.subjects.busy.maxOperationsPerRequest,
  ],
  ["chart-cost", "Monthly cost", "$ a month", (m) => m.cost.total],
  ["chart-latency", "Decision latency p99", "ms", (m) => m.latencyMs.p99],
];

/** Each minute, a line per mode. */
const MINUTES: readonly (readonly [string, string, string, (minute: Timeline) => number])[] = [
  [
    "timeline-attackers",
    "Attacker requests admitted per minute",
    "requests",
    (m) => m.attackerAdmitted,
  ],
  [
    "timeline-legitimate",
    "Legitimate requests admitted per minute",
    "requests",
    (m) => m.legitimateAdmitted,
  ],
  ["timeline-operations", "Store operations per minute", "operations", (m) => m.operations],
];

function charts(report: SimulationReport): { figures: PageChart[]; timelines: PageChart[] } {
  const modes = report.modes;
  const label = (mode: ModeReport) => modeLabel(mode, report);
  return {
    figures: FIGURES.map(([target, title, unit, value]) => ({
      target,
      spec: bars(modes, label, title, unit, value),
    })),
    timelines: MINUTES.map(([target, title, unit, value]) => ({
      target,
      spec: perMinute(modes, label, title, unit, value),
    })),
  };
}

export function formatHtml(
  report: SimulationReport,
  busyAbove: number,
  files: ChartFiles = uplotFiles("simulate --html"),
): string {
  const { figures, timelines } = charts(report);
  const rows = figureRows(report, busyAbove);
  const [header, ...figureLines] = rows as [string[], ...string[][]];
  const replicas = report.replicas.length > 0 ? ` (${report.replicas.join(", ")})` : "";
  const body = `<h1>edgelimit simulate: ${escapeHtml(report.scenario)}</h1>
<p class="meta">Seed ${report.seed}, ${report.durationSeconds} s simulated, store ${escapeHtml(report.store + replicas)}, deployment ${escapeHtml(report.deployment)}. Costs extrapolated to ${report.monthlyRequests.toLocaleString("en-US")} requests a month.</p>
<section id="charts">${figures.map((chart) => chartPlace(chart.target)).join("\n")}</section>
<h2>Each minute</h2>
<section id="timelines">${timelines.map((chart) => chartPlace(chart.target)).join("\n")}</section>
<h2>All figures</h2>
${htmlTable(
  "table",
  header.map((cell) => (cell === "" ? "figure" : cell)),
  figureLines,
  header.map((_, i) => i > 0),
)}`;
  return reportPage(
    { title: `edgelimit simulate: ${report.scenario}`, body, charts: [...figures, ...timelines] },
    files,
  );
}
