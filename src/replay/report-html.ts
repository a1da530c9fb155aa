import { type ChartFiles, type ChartSpec, uplotFiles } from "../charts/uplot.js";
import { escapeHtml } from "../html.js";
import { chartPlace, htmlTable, type PageChart, reportPage } from "../offline/html.js";
import {
  type PolicyReport,
  percent,
  type ReplayReport,
  readableSubject,
  suggestedChanges,
} from "./report.js";
import type { TimeSeries } from "./series.js";

const NUMERIC = [false, false, true, true, true, true, true, true, true, true];
const PALETTE = ["#b42318", "#b54708", "#6941c6", "#1570ef", "#087443", "#c11574", "#475467"];

function rulesTable(report: PolicyReport, id: string): string {
  const rows = report.rules.map((rule) => [
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
  ]);
  const header = ["rule", "limit", "matched", "allowed", "challenged", "blocked", "shadow-only"];
  header.push("refused", "subjects refused", "first refusal", "last refusal");
  return htmlTable(id, header, rows, NUMERIC);
}

function tuningTable(report: ReplayReport): string {
  const rows = report.rules
    .filter((rule) => rule.subjects > 0)
    .map((rule) => [
      rule.id,
      rule.window,
      rule.peaks.subjects,
      rule.peaks.p50,
      rule.peaks.p90,
      rule.peaks.p99,
      rule.peaks.p999,
      rule.peaks.max,
      rule.limit,
      rule.suggestion.fits,
    ]);
  const header = ["rule", "window", "subjects", "p50", "p90", "p99", "p99.9", "max", "limit"];
  header.push(`fits (refuses at most ${percent(report.refuseAtMost)} of subjects)`);
  return htmlTable("tuning", header, rows, NUMERIC);
}

function changesList(report: ReplayReport): string {
  const { heading, lines } = suggestedChanges(report);
  const items = lines.map((line) => `<li>${escapeHtml(line)}</li>`).join("");
  return `<h2>${escapeHtml(heading)}</h2>\n<ul class="changes" id="changes">${items}</ul>`;
}

function offendersTable(report: PolicyReport): string {
  const rows = report.topRefused.map((offender) => [
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
  ]);
  const header = ["subject", "refused", "challenged", "blocked", "peak/window", "rules", "first"];
  header.push("last", "paths", "user agents");
  return htmlTable("offenders", header, rows, [false, true, true, true, true]);
}

/** Requests per second allowed against refused, and refusals per second by rule. */
function charts(report: ReplayReport, series: TimeSeries): PageChart[] {
  const seconds = series.bucketMs / 1000;
  const x = series.allowed.map((_, i) => (series.start + i * series.bucketMs) / 1000);
  const rate = (values: readonly number[]) => values.map((value) => value / seconds);
  const over = (title: string, lines: ChartSpec["series"]): ChartSpec => ({
    title,
    x,
    axis: "time",
    yLabel: "requests/s",
    series: lines,
  });
  const found: PageChart[] = [
    {
      target: "chart-actions",
      spec: over(`Requests per second (buckets of ${seconds} s)`, [
        { label: "allowed", color: "#1b7f3b", values: rate(series.allowed) },
        { label: "refused", color: "#b42318", values: rate(series.refused) },
      ]),
    },
  ];
  const refusing = report.rules
    .map((rule, i) => ({ rule, values: series.byRule[i] ?? [] }))
    .filter(({ values }) => values.some((value) => value > 0));
  if (refusing.length > 0) {
    found.push({
      target: "chart-rules",
      spec: over(
        "Refused per second, by rule",
        refusing.map(({ rule, values }, i) => ({
          label: rule.shadow ? `${rule.id} (shadow)` : rule.id,
          color: PALETTE[i % PALETTE.length] as string,
          values: rate(values),
        })),
      ),
    });
  }
  return found;
}

/** The page: the figures, the charts, the tables and the suggested changes; nothing fetched. */
export function formatHtml(
  report: ReplayReport,
  series: TimeSeries,
  files: ChartFiles = uplotFiles("replay --html"),
): string {
  const { allow, challenge, block } = report.actions;
  const inputs = report.inputs.map((input) => `${input.name} (${input.format})`).join(", ");
  const drawn = charts(report, series);
  const rulesChart = drawn.some((chart) => chart.target === "chart-rules")
    ? chartPlace("chart-rules")
    : '<div class="chart" id="chart-rules">No rule refused a request.</div>';
  const body = `<h1>edgelimit replay</h1>
<div class="meta">policy ${escapeHtml(report.policy)} &middot; ${escapeHtml(inputs)}</div>
<div class="meta" id="span">${report.requests} requests from ${escapeHtml(report.start ?? "-")} to ${escapeHtml(report.end ?? "-")};
  ${report.malformed} malformed lines; ${report.truncated} truncated lines (replayed); ${report.late} late lines</div>
<div class="meta" id="identity">${escapeHtml(report.identity.note)}</div>
<div class="figures">
  <div class="figure allow"><div>allowed</div><div class="value" id="total-allow">${allow}</div></div>
  <div class="figure challenge"><div>challenged</div><div class="value" id="total-challenge">${challenge}</div></div>
  <div class="figure block"><div>blocked</div><div class="value" id="total-block">${block}</div></div>
</div>
<h2>Over time</h2>
${chartPlace("chart-actions")}<br>
${rulesChart}
<h2>Rules</h2>
${rulesTable(report, "rules")}
<h2>Top refused subjects</h2>
${offendersTable(report)}
<h2>Tuning: each subject's peak requests per window</h2>
${tuningTable(report)}
${changesList(report)}
${
  report.compare === undefined
    ? ""
    : `<h2>Compared with ${escapeHtml(report.compare.policy)}</h2>\n${rulesTable(report.compare, "compare-rules")}`
}`;
  return reportPage({ title: `edgelimit replay: ${report.policy}`, body, charts: drawn }, files);
}
