/**
 * The HTML reports of replay and simulate: one self-contained page each (uPlot, its CSS, the
 * data and the tables inline; nothing fetched when it is opened), built from the same parts.
 * Every value from a log or a scenario is escaped: a path or a user agent is whatever a client
 * sent.
 */
import { CHART_SCRIPT, type ChartFiles, type ChartSpec } from "../charts/uplot.js";
import { escapeHtml } from "../html.js";

/** JSON that is safe inside a `<script>` element, whatever a client put in a path. */
function scriptJson(value: unknown): string {
  return JSON.stringify(value)
    .replace(/</g, "\\u003c")
    .replace(/\u2028|\u2029/g, " ");
}

function inlineScript(source: string): string {
  return source.replace(/<\/script/gi, "<\\/script");
}

/** A table; `numeric[i]` right-aligns column i. */
export function htmlTable(
  id: string,
  header: readonly string[],
  rows: readonly (readonly (string | number)[])[],
  numeric: readonly boolean[] = [],
): string {
  const head = header.map((cell) => `<th>${escapeHtml(cell)}</th>`).join("");
  const body = rows
    .map(
      (cells) =>
        `<tr>${cells
          .map(
            (cell, i) =>
              `<td${numeric[i] === true ? ' class="num"' : ""}>${escapeHtml(String(cell))}</td>`,
          )
          .join("")}</tr>`,
    )
    .join("");
  return `<table id="${id}"><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table>`;
}

/** Where a chart goes; `reportPage` draws it there from its spec. */
export interface PageChart {
  readonly target: string;
  readonly spec: ChartSpec;
}

export function chartPlace(target: string): string {
  return `<div class="chart" id="${target}"></div>`;
}

export interface ReportPage {
  readonly title: string;
  /** The page's content, HTML, with a `chartPlace` for each chart. */
  readonly body: string;
  readonly charts: readonly PageChart[];
}

const STYLE = `
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
  #table td:first-child { white-space: pre; }
  .chart { background: #fff; border: 1px solid #dde1e8; border-radius: 6px; display: inline-block; margin: 0 1rem 1rem 0; vertical-align: top; }
  ul.changes { background: #fff; border: 1px solid #dde1e8; border-radius: 6px; padding: .5rem 1rem .5rem 2rem; display: inline-block; margin: 0; }
`;

const DRAW = `JSON.parse(document.getElementById("report-charts").textContent).forEach(function (chart) {
  edgelimitChart(chart.target, chart.spec);
});`;

/** The whole page; `files` (uPlot's) are needed only when there are charts. */
export function reportPage(page: ReportPage, files: ChartFiles | undefined): string {
  const charts =
    page.charts.length === 0 || files === undefined
      ? ""
      : `<script type="application/json" id="report-charts">${scriptJson(page.charts)}</script>
<script>${inlineScript(files.script)}</script>
<script>${inlineScript(`${CHART_SCRIPT}${DRAW}`)}</script>`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>${escapeHtml(page.title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
${files === undefined ? "" : `<style>${files.style}</style>\n`}<style>${STYLE}</style>
</head>
<body>
${page.body}
${charts}
</body>
</html>
`;
}
