/**
 * The one way the project draws charts: uPlot (an optional peer, its files from node_modules)
 * and one browser function, `edgelimitChart(target, spec)`, that turns a `ChartSpec` into a
 * uPlot chart: lines over time or over a numbered axis, or one bar per category. The replay and
 * simulate reports inline both in a self-contained page; the gateway's dashboard serves them
 * from its admin port and updates its chart with `setData`.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { EdgelimitError } from "../core/errors.js";

export interface ChartSeries {
  readonly label: string;
  readonly color: string;
  /** One value per x; null leaves a gap (a bar chart's other categories). */
  readonly values: readonly (number | null)[];
  /** Line width in CSS pixels (default 1.5). */
  readonly width?: number;
  /** A dashed line: `[dash, gap]` in CSS pixels. */
  readonly dash?: readonly number[];
}

export interface ChartSpec {
  readonly title: string;
  /** Epoch seconds (`time`), numbers, or category indexes (`categories`). */
  readonly x: readonly number[];
  /** `time`: x is epoch seconds; `number`: x is a plain number; `categories`: one bar per x. */
  readonly axis: "time" | "number" | "categories";
  /** Names of the categories (x = 0, 1, ...), for `categories`. */
  readonly categories?: readonly string[];
  readonly xLabel?: string;
  readonly yLabel: string;
  readonly series: readonly ChartSeries[];
  /** Width in CSS pixels; default: the window's, between 600 and 1200. */
  readonly width?: number;
  readonly height?: number;
}

/**
 * `edgelimitChart(target, spec)` in the browser: `target` an element or its id, `spec` a
 * ChartSpec. Returns the uPlot instance (the dashboard calls its `setData`); every chart is
 * also kept in `window.edgelimitCharts` by its element's id. Written for any browser uPlot
 * supports, hence `var` and no arrow functions.
 */
export const CHART_SCRIPT = `function edgelimitChart(target, spec) {
  var el = typeof target === "string" ? document.getElementById(target) : target;
  var bars = spec.axis === "categories";
  var names = spec.categories || [];
  var series = [{ label: spec.xLabel || (spec.axis === "time" ? "time" : "x") }];
  if (bars) series[0].value = function (u, v) { return v == null ? "-" : names[v]; };
  spec.series.forEach(function (s) {
    series.push({
      label: s.label,
      stroke: s.color,
      width: bars ? 0 : (s.width || 1.5),
      dash: s.dash,
      fill: bars ? s.color : undefined,
      paths: bars ? uPlot.paths.bars({ size: [0.6, 90] }) : undefined,
      points: bars ? { show: false } : undefined
    });
  });
  var x = { label: spec.xLabel };
  var scales = { x: { time: spec.axis === "time" } };
  var whole = spec.x.every(function (v) { return Math.round(v) === v; });
  if (spec.axis === "number" && whole) x.incrs = [1, 2, 5, 10, 15, 30, 60, 120, 240, 480, 1440];
  if (bars) {
    x.splits = function () { return names.map(function (_, i) { return i; }); };
    x.values = function (u, splits) { return splits.map(function (i) { return names[i]; }); };
    scales.x.range = [-0.5, names.length - 0.5];
    scales.y = { range: function (u, min, max) { return [0, max > 0 ? max * 1.15 : 1]; } };
  }
  var width = spec.width || Math.max(600, Math.min(1200, window.innerWidth - 60));
  var chart = new uPlot({
    title: spec.title,
    width: width,
    height: spec.height || 260,
    series: series,
    scales: scales,
    legend: { live: !bars },
    axes: [x, { label: spec.yLabel }]
  }, [spec.x].concat(spec.series.map(function (s) { return s.values; })), el);
  window.edgelimitCharts = window.edgelimitCharts || {};
  if (el.id) window.edgelimitCharts[el.id] = chart;
  return chart;
}
`;

export interface ChartFiles {
  readonly script: string;
  readonly style: string;
}

/**
 * uPlot's script and style, for a page that must need no network. uPlot is an optional peer:
 * `what` says who needs it in the error when it is not installed.
 */
export function uplotFiles(what: string): ChartFiles {
  const require = createRequire(import.meta.url);
  try {
    return {
      script: readFileSync(require.resolve("uplot/dist/uPlot.iife.min.js"), "utf8"),
      style: readFileSync(require.resolve("uplot/dist/uPlot.min.css"), "utf8"),
    };
  } catch {
    throw new EdgelimitError(
      "EL_MISSING_PACKAGE",
      `${what} needs the package uplot (its charts), which is not installed: npm install uplot`,
    );
  }
}
