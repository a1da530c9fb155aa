/**
 * `--html FILE`: one self-contained page with the modes side by side: a bar per mode for each
 * headline figure, what was admitted and what the store was asked each minute, and every
 * figure in a table. Drawn like every chart of the project (charts/uplot.ts).
 */
import { type ChartFiles, type ChartSpec, uplotFiles } from "../charts/uplot.js";
import { chartPlace, escapeHtml, htmlTable, type PageChart, reportPage } from "../offline/html.js";
import type { Timeline } from "./accounting.js";
import { figureRows } from "./figures.js";
import type { ModeReport, SimulationReport } from "./report.js";

const COLORS = ["#c0392b", "#2471a3", "#239b56", "#b9770e", "#7d3c98"];

function color(index: number): string {
  return COLORS[index % COLORS.length] as string;
}

/** One bar per mode: one series per mode, so the legend names and colours them. */
function bars(
  modes: readonly ModeReport[],
  title: string,
  yLabel: string,
  value: (mode: ModeReport) => number,
): ChartSpec {
  return {
    title,
    x: modes.map((_, i) => i),
    axis: "categories",
    categories: modes.map((mode) => mode.mode),
    yLabel,
    width: 420,
    height: 240,
    series: modes.map((mode, i) => ({
      label: mode.mode,
      color: color(i),
      values: modes.map((_, j) => (i === j ? value(mode) : null)),
    })),
  };
}

/** A line per mode over the simulated minutes. */
function perMinute(
  modes: readonly ModeReport[],
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
        label: mode.mode,
        color: color(i),
        values: minutes.map((minute) => byMinute.get(minute) ?? null),
      };
    }),
  };
}

function charts(modes: readonly ModeReport[]): { figures: PageChart[]; timelines: PageChart[] } {
  const percent = (share: number) => share * 100;
  return {
    figures: [
      {
        target: "chart-over",
        spec: bars(modes, "Over-admission: max beyond the limit", "% of the limit", (m) =>
          percent(m.overAdmission.maxShare),
        ),
      },
      {
        target: "chart-lost",
        spec: bars(modes, "Lost increments", "% of those counted", (m) =>
          percent(m.lostIncrements.share),
        ),
      },
      {
        target: "chart-operations",
        spec: bars(
          modes,
          "Store operations per request",
          "operations",
          (m) => m.store.perRequest.operations,
        ),
      },
      {
        target: "chart-busy",
        spec: bars(
          modes,
          "Store operations per request, busiest subject-window",
          "operations",
          (m) => m.store.subjects.busy.maxOperationsPerRequest,
        ),
      },
      {
        target: "chart-cost",
        spec: bars(modes, "Monthly cost", "$ a month", (m) => m.cost.total),
      },
      {
        target: "chart-latency",
        spec: bars(modes, "Decision latency p99", "ms", (m) => m.latencyMs.p99),
      },
    ],
    timelines: [
      {
        target: "timeline-attackers",
        spec: perMinute(modes, "Attacker requests admitted per minute", "requests", (m) => {
          return m.attackerAdmitted;
        }),
      },
      {
        target: "timeline-legitimate",
        spec: perMinute(modes, "Legitimate requests admitted per minute", "requests", (m) => {
          return m.legitimateAdmitted;
        }),
      },
      {
        target: "timeline-operations",
        spec: perMinute(modes, "Store operations per minute", "operations", (m) => m.operations),
      },
    ],
  };
}

export function formatHtml(
  report: SimulationReport,
  busyAbove: number,
  files: ChartFiles = uplotFiles("simulate --html"),
): string {
  const { figures, timelines } = charts(report.modes);
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
