import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { EdgelimitError } from "../core/errors.js";
import { type PolicyReport, type ReplayReport, readableSubject } from "./report.js";
import type { TimeSeries } from "./series.js";

export function escapeHtml(text: string): string {
  return text
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;");
}

/** JSON that is safe inside a `<script>` element, whatever a client put in a path. */
function scriptJson(value: unknown): string {
  return JSON.stringify(value)
    .replace(/</g, "\\u003c")
    .replace(/\u2028|\u2029/g, " ");
}

function inlineScript(source: string): string {
  return source.replace(/<\/script/gi, "<\\/script");
}

function row(cells: readonly (string | number)[], numeric: readonly boolean[] = []): string {
  return `<tr>${cells
    .map(
      (cell, i) =>
        `<td${numeric[i] === true ? ' class="num"' : ""}>${escapeHtml(String(cell))}</td>`,
    )
    .join("")}</tr>`;
}

function head(cells: readonly string[]): string {
  return `<thead><tr>${cells.map((cell) => `<th>${escapeHtml(cell)}</th>`).join("")}</tr></thead>`;
}

function percent(share: number): string {
  return `${(share * 100).toFixed(2)}%`;
}

function rulesTable(report: PolicyReport, id: string): string {
  const rows = report.rules.map((rule) =>
    row(
      [
        rule.shadow ? `${rule.id} (shadow)` : rule.id,
        `${rule.limit}/${rule.window}`,
        rule.matched,
        rule.allowed,
        rule.challenged,
        rule.blocked,
        rule.shadowRefused,
        percent(rule.refusedShare),
        `${rule.refusedSubjects}/${rule.subjects}`,
        rule.firstRefusal ?? "-",
        rule.lastRefusal ?? "-",
      ],
      [false, false, true, true, true, true, true, true, true],
    ),
  );
  return `<table id="${id}">${head([
    "rule",
    "limit",
    "matched",
    "allowed",
    "challenged",
    "blocked",
    "shadow-only",
    "refused",
    "subjects refused",
    "first refusal",
    "last refusal",
  ])}<tbody>${rows.join("")}</tbody></table>`;
}

function tuningTable(report: ReplayReport): string {
  const rows = report.rules
    .filter((rule) => rule.subjects > 0)
    .map((rule) =>
      row(
        [
          rule.id,
          rule.window,
          rule.peaks.subjects,
          rule.peaks.p50,
          rule.peaks.p90,
          rule.peaks.p99,
          rule.peaks.p999,
          rule.peaks.max,
          rule.limit,
          rule.suggestion.suggestedLimit,
        ],
        [false, false, true, true, true, true, true, true, true, true],
      ),
    );
  return `<table id="tuning">${head([
    "rule",
    "window",
    "subjects",
    "p50",
    "p90",
    "p99",
    "p99.9",
    "max",
    "limit",
    `fits (refuses at most ${percent(report.refuseAtMost)} of subjects)`,
  ])}<tbody>${rows.join("")}</tbody></table>`;
}

function offendersTable(report: PolicyReport): string {
  const rows = report.topRefused.map((offender) =>
    row(
      [
        readableSubject(offender.subject),
        offender.refused,
        offender.challenged,
        offender.blocked,
        offender.peak,
        offender.rules.join(", "),
        offender.first,
        offender.last,
        offender.paths.map((p) => `${p.value} (${p.count})`).join(", "),
        offender.userAgents.map((p) => `${p.value} (${p.count})`).join(", "),
      ],
      [false, true, true, true, true],
    ),
  );
  return `<table id="offenders">${head([
    "subject",
    "refused",
    "challenged",
    "blocked",
    "peak/window",
    "rules",
    "first",
    "last",
    "paths",
    "user agents",
  ])}<tbody>${rows.join("")}</tbody></table>`;
}

/** The page's chart data: seconds since the epoch and rates per second, per bucket. */
function chartData(report: ReplayReport, series: TimeSeries): unknown {
  const seconds = series.bucketMs / 1000;
  const times = series.allowed.map((_, i) => (series.start + i * series.bucketMs) / 1000);
  const rate = (values: readonly number[]) => values.map((value) => value / seconds);
  return {
    bucketSeconds: seconds,
    times,
    allowed: rate(series.allowed),
    refused: rate(series.refused),
    rules: report.rules.map((rule, i) => ({
      id: rule.shadow ? `${rule.id} (shadow)` : rule.id,
      refused: rate(series.byRule[i] ?? []),
    })),
  };
}

const PAGE_SCRIPT = `
const data = JSON.parse(document.getElementById("replay-data").textContent);
const palette = ["#b42318", "#b54708", "#6941c6", "#1570ef", "#087443", "#c11574", "#475467"];
function draw(target, title, labels, columns, colors) {
  const el = document.getElementById(target);
  const width = Math.max(600, Math.min(1200, window.innerWidth - 60));
  const series = [{}].concat(labels.map((label, i) => ({ label, stroke: colors[i % colors.length], width: 1.5 })));
  new uPlot({ title, width, height: 260, series, axes: [{}, { label: "requests/s" }] }, [data.times].concat(columns), el);
}
draw("chart-actions", "Requests per second (buckets of " + data.bucketSeconds + " s)", ["allowed", "refused"],
  [data.allowed, data.refused], ["#1b7f3b", "#b42318"]);
const refusing = data.rules.filter((rule) => rule.refused.some((value) => value > 0));
if (refusing.length > 0) {
  draw("chart-rules", "Refused per second, by rule", refusing.map((rule) => rule.id),
    refusing.map((rule) => rule.refused), palette);
} else {
  document.getElementById("chart-rules").textContent = "No rule refused a request.";
}
`;

/** A self-contained page: uPlot, its CSS, the data and the tables inline; nothing fetched. */
export function formatHtml(report: ReplayReport, series: TimeSeries): string {
  const { uplotJs, uplotCss } = uplotFiles();
  const { allow, challenge, block } = report.actions;
  const inputs = report.inputs.map((input) => `${input.name} (${input.format})`).join(", ");
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>edgelimit replay: ${escapeHtml(report.policy)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>${uplotCss}</style>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5rem; color: #1d2330; background: #f7f8fa; }
  h1 { font-size: 1.3rem; margin: 0 0 .2rem; } h2 { font-size: 1rem; margin: 1.5rem 0 .5rem; }
  .meta { color: #5b6475; }
  .figures { display: flex; gap: 1rem; flex-wrap: wrap; margin-top: 1rem; }
  .figure { background: #fff; border: 1px solid #dde1e8; border-radius: 6px; padding: .7rem 1rem; min-width: 9rem; }
  .figure .value { font-size: 1.8rem; font-variant-numeric: tabular-nums; }
  .allow .value { color: #1b7f3b; } .block .value { color: #b42318; } .challenge .value { color: #b54708; }
  table { border-collapse: collapse; background: #fff; }
  th, td { border: 1px solid #dde1e8; padding: .25rem .6rem; text-align: left; vertical-align: top; }
  td.num { text-align: right; font-variant-numeric: tabular-nums; }
  .chart { background: #fff; border: 1px solid #dde1e8; border-radius: 6px; display: inline-block; margin-bottom: 1rem; }
</style>
</head>
<body>
<h1>edgelimit replay</h1>
<div class="meta">policy ${escapeHtml(report.policy)} &middot; ${escapeHtml(inputs)}</div>
<div class="meta" id="span">${report.requests} requests from ${escapeHtml(report.start ?? "-")} to ${escapeHtml(report.end ?? "-")};
  ${report.malformed} malformed lines; ${report.late} late lines</div>
<div class="meta" id="identity">${escapeHtml(report.identity.note)}</div>
<div class="figures">
  <div class="figure allow"><div>allowed</div><div class="value" id="total-allow">${allow}</div></div>
  <div class="figure challenge"><div>challenged</div><div class="value" id="total-challenge">${challenge}</div></div>
  <div class="figure block"><div>blocked</div><div class="value" id="total-block">${block}</div></div>
</div>
<h2>Over time</h2>
<div class="chart" id="chart-actions"></div><br>
<div class="chart" id="chart-rules"></div>
<h2>Rules</h2>
${rulesTable(report, "rules")}
<h2>Top refused subjects</h2>
${offendersTable(report)}
<h2>Tuning: each subject's peak requests per window</h2>
${tuningTable(report)}
${
  report.compare === undefined
    ? ""
    : `<h2>Compared with ${escapeHtml(report.compare.policy)}</h2>\n${rulesTable(report.compare, "compare-rules")}`
}
<script type="application/json" id="replay-data">${scriptJson(chartData(report, series))}</script>
<script>${inlineScript(uplotJs)}</script>
<script>${PAGE_SCRIPT}</script>
</body>
</html>
`;
}

/** uPlot's script and style, inlined so the page needs no network; uPlot is an optional peer. */
function uplotFiles(): { uplotJs: string; uplotCss: string } {
  const require = createRequire(import.meta.url);
  try {
    return {
      uplotJs: readFileSync(require.resolve("uplot/dist/uPlot.iife.min.js"), "utf8"),
      uplotCss: readFileSync(require.resolve("uplot/dist/uPlot.min.css"), "utf8"),
    };
  } catch {
    throw new EdgelimitError(
      "EL_BAD_ARGUMENT",
      "replay --html needs the package uplot (its charts), which is not installed: npm install uplot",
    );
  }
}
