/**
 * `--html FILE`: one self-contained page (inline CSS and SVG, no script, nothing fetched) with
 * the modes side by side: bar charts of the headline figures and, per mode, a line chart of
 * what was admitted each minute.
 */
import { escapeHtml } from "../replay/report-html.js";
import { type ModeReport, modeLabel, type SimulationReport } from "./report.js";

const COLORS = ["#c0392b", "#2471a3", "#239b56", "#b9770e", "#7d3c98"];

/** A horizontal bar per mode. */
function bars(
  id: string,
  title: string,
  modes: readonly ModeReport[],
  value: (m: ModeReport) => number,
  label: (n: number) => string,
): string {
  const values = modes.map(value);
  const max = Math.max(...values, Number.MIN_VALUE);
  const rowHeight = 26;
  const height = modes.length * rowHeight + 10;
  const body = modes
    .map((mode, i) => {
      const width = Math.max(1, ((values[i] as number) / max) * 360);
      const y = 5 + i * rowHeight;
      return `<text x="0" y="${y + 16}">${escapeHtml(modeLabel(mode))}</text><rect x="70" y="${y}" width="${width.toFixed(1)}" height="20" fill="${COLORS[i % COLORS.length]}"><title>${escapeHtml(label(values[i] as number))}</title></rect><text x="${(76 + width).toFixed(1)}" y="${y + 16}">${escapeHtml(label(values[i] as number))}</text>`;
    })
    .join("");
  return `<figure id="${id}"><figcaption>${escapeHtml(title)}</figcaption><svg xmlns="http://www.w3.org/2000/svg" role="img" viewBox="0 0 560 ${height}" width="560" height="${height}">${body}</svg></figure>`;
}

/** Admitted requests per minute, legitimate and attacker, one line chart per mode. */
function timeline(mode: ModeReport, index: number): string {
  const points = mode.timeline;
  const width = 560;
  const height = 160;
  const max = Math.max(1, ...points.map((p) => Math.max(p.legitimateAdmitted, p.attackerAdmitted)));
  const x = (i: number) => 40 + (points.length <= 1 ? 0 : (i / (points.length - 1)) * (width - 50));
  const y = (v: number) => height - 20 - (v / max) * (height - 30);
  const path = (pick: (p: (typeof points)[number]) => number) =>
    points
      .map((p, i) => `${i === 0 ? "M" : "L"}${x(i).toFixed(1)},${y(pick(p)).toFixed(1)}`)
      .join(" ");
  return `<figure id="timeline-${index}" class="timeline"><figcaption>${escapeHtml(modeLabel(mode))}: admitted per minute (legitimate solid, attackers dashed)</figcaption><svg xmlns="http://www.w3.org/2000/svg" role="img" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}"><line x1="40" y1="${height - 20}" x2="${width - 10}" y2="${height - 20}" stroke="#888"/><text x="0" y="14">${max}</text><text x="0" y="${height - 22}">0</text><path class="legitimate" d="${path((p) => p.legitimateAdmitted)}" fill="none" stroke="${COLORS[1]}" stroke-width="2"/><path class="attackers" d="${path((p) => p.attackerAdmitted)}" fill="none" stroke="${COLORS[0]}" stroke-width="2" stroke-dasharray="5,3"/></svg></figure>`;
}

export function formatHtml(report: SimulationReport, text: string): string {
  const modes = report.modes;
  const percent = (n: number) => `${(n * 100).toFixed(1)}%`;
  const charts = [
    bars(
      "chart-over",
      "Over-admission: max share of the limit admitted beyond it",
      modes,
      (m) => m.overAdmission.maxShare,
      percent,
    ),
    bars(
      "chart-lost",
      "Lost increments (share of those counted)",
      modes,
      (m) => m.lostIncrements.share,
      percent,
    ),
    bars(
      "chart-operations",
      "Store operations per request",
      modes,
      (m) => m.store.perRequest.operations,
      (n) => n.toFixed(4),
    ),
    bars(
      "chart-busy",
      "Store operations per request, busiest subject-window",
      modes,
      (m) => m.store.subjects.busy.maxOperationsPerRequest,
      (n) => n.toFixed(4),
    ),
    bars(
      "chart-cost",
      "Monthly cost",
      modes,
      (m) => m.cost.total,
      (n) => `$${n.toFixed(2)}`,
    ),
    bars(
      "chart-latency",
      "Decision latency p99 (ms)",
      modes,
      (m) => m.latencyMs.p99,
      (n) => n.toFixed(1),
    ),
  ];
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>edgelimit simulate: ${escapeHtml(report.scenario)}</title>
<style>body{font:14px system-ui,sans-serif;margin:2em;max-width:1200px}figure{display:inline-block;margin:0 2em 2em 0;vertical-align:top}figcaption{font-weight:600;margin-bottom:.4em}svg text{font:12px system-ui,sans-serif}pre{background:#f4f4f4;padding:1em;overflow:auto}</style>
</head><body>
<h1>edgelimit simulate: ${escapeHtml(report.scenario)}</h1>
<p>Seed ${report.seed}, ${report.durationSeconds} s simulated, store ${escapeHtml(report.store)}${report.replicas.length > 0 ? ` (${escapeHtml(report.replicas.join(", "))})` : ""}, deployment ${escapeHtml(report.deployment)}. Costs extrapolated to ${report.monthlyRequests.toLocaleString("en-US")} requests a month.</p>
<section id="charts">${charts.join("\n")}</section>
<section id="timelines">${modes.map(timeline).join("\n")}</section>
<h2>All figures</h2>
<pre id="table">${escapeHtml(text)}</pre>
</body></html>
`;
}
