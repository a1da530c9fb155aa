import { CHART_SCRIPT } from "../charts/uplot.js";
import type { GatewaySnapshot } from "./snapshot.js";

/**
 * The dashboard: one HTML page and one script, both served by the admin listener. The chart is
 * drawn as every chart of the project is (charts/uplot.ts), with uPlot from node_modules (see
 * admin.ts); nothing is fetched from outside the admin port. Every
 * value from the gateway is written with textContent, never as HTML: offender keys contain
 * whatever a client put in its token's subject, and an override's subject and note whatever an
 * operator typed.
 */
export function dashboardPage(first: GatewaySnapshot): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>edgelimit gateway</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/assets/uPlot.min.css">
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5rem; color: #1d2330; background: #f7f8fa; }
  h1 { font-size: 1.3rem; margin: 0 0 .2rem; }
  h2 { font-size: 1rem; margin: 1.5rem 0 .5rem; }
  .meta { color: #5b6475; }
  .figures { display: flex; gap: 1rem; flex-wrap: wrap; margin-top: 1rem; }
  .figure { background: #fff; border: 1px solid #dde1e8; border-radius: 6px; padding: .7rem 1rem; min-width: 9rem; }
  .figure .value { font-size: 1.8rem; font-variant-numeric: tabular-nums; }
  .figure .rate { color: #5b6475; font-variant-numeric: tabular-nums; }
  .allow .value { color: #1b7f3b; } .block .value { color: #b42318; }
  .challenge .value { color: #b54708; } .unavailable .value { color: #6941c6; }
  table { border-collapse: collapse; background: #fff; }
  th, td { border: 1px solid #dde1e8; padding: .25rem .6rem; text-align: left; }
  td.num { text-align: right; font-variant-numeric: tabular-nums; }
  #chart { background: #fff; border: 1px solid #dde1e8; border-radius: 6px; display: inline-block; }
  #status.down, #store-state.down { color: #b42318; }
</style>
</head>
<body>
<h1>edgelimit gateway</h1>
<div class="meta">upstream <span id="upstream">-</span> &middot; store <span id="store">-</span> &middot;
  <span id="limiting">-</span> &middot; in flight <span id="in-flight">0</span> &middot;
  block-cache hits <span id="block-cache-hits">0</span> &middot; <span id="status">connecting</span></div>
<div class="figures">
  <div class="figure allow"><div>allowed</div><div class="value" id="total-allow">0</div><div class="rate"><span id="rate-allow">0</span>/s</div></div>
  <div class="figure block"><div>blocked</div><div class="value" id="total-block">0</div><div class="rate"><span id="rate-block">0</span>/s</div></div>
  <div class="figure challenge"><div>challenged</div><div class="value" id="total-challenge">0</div><div class="rate"><span id="rate-challenge">0</span>/s</div></div>
  <div class="figure unavailable"><div>failed closed</div><div class="value" id="total-unavailable">0</div><div class="rate"><span id="rate-unavailable">0</span>/s</div></div>
  <div class="figure failed-open"><div>failed open</div><div class="value" id="total-failed-open">0</div><div class="rate">store failed, let through</div></div>
  <div class="figure shadow"><div>shadow refusals</div><div class="value" id="total-shadow">0</div><div class="rate">shadow rules would have refused; let through</div></div>
  <div class="figure failed-local"><div>counted locally</div><div class="value" id="total-failed-local">0</div><div class="rate" id="local-state">store failed, counted here</div></div>
  <div class="figure store"><div>store</div><div class="value" id="store-state">-</div><div class="rate" id="store-error">no failure</div><div class="rate" id="store-calls"></div></div>
  <div class="figure latency"><div>decision time</div><div class="value"><span id="decision-p50">0</span> ms</div><div class="rate">p99 <span id="decision-p99">0</span> ms (last <span id="decision-count">0</span>)</div></div>
</div>
<h2>Decisions per second (last two minutes)</h2>
<div id="chart"></div>
<h2>Top offending keys (blocked or challenged, <span id="offenders-window">recently</span>)</h2>
<table><thead><tr><th>subject</th><th>refusals</th><th>may over-count by</th></tr></thead><tbody id="offenders"></tbody></table>
<h2>Allow and deny lists</h2>
<table><thead><tr><th>list</th><th>kind</th><th>entries</th><th>last refresh</th><th>errors</th></tr></thead><tbody id="lists"></tbody></table>
<h2>Overrides in force</h2>
<div class="meta" id="overrides-meta"></div>
<table><thead><tr><th>subject</th><th>applies to</th><th>effect</th><th>expires</th><th>note</th><th>set</th></tr></thead><tbody id="overrides"></tbody></table>
<h2>Active policy</h2>
<div class="meta" id="policy-meta"></div>
<table><thead><tr><th>rule</th><th>who</th><th>path</th><th>key</th><th>limit</th><th>algorithm</th><th>over limit</th><th>store down</th><th>shadow refusals</th></tr></thead><tbody id="rules"></tbody></table>
<script type="application/json" id="first-snapshot">${snapshotData(first)}</script>
<script src="/assets/uPlot.iife.min.js"></script>
<script src="/assets/dashboard.js"></script>
</body>
</html>
`;
}

export function dashboardScript(): string {
  return `"use strict";
${CHART_SCRIPT}
(function () {
  var ACTIONS = ["allow", "block", "challenge", "unavailable"];
  var COLORS = { allow: "#1b7f3b", block: "#b42318", challenge: "#b54708", unavailable: "#6941c6" };
  var LABELS = { allow: "allowed", block: "blocked", challenge: "challenged", unavailable: "failed closed" };
  var chart;

  function text(id, value) { document.getElementById(id).textContent = String(value); }

  function rows(id, data, cells) {
    var body = document.getElementById(id);
    body.replaceChildren();
    data.forEach(function (item) {
      var tr = document.createElement("tr");
      cells(item).forEach(function (cell) {
        var td = document.createElement("td");
        td.textContent = String(cell[0]);
        if (cell[1]) td.className = "num";
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
  }

  // "in 12 min": against the server's clock (the snapshot's now), as the limiter expires them.
  function expiry(until, now) {
    if (until === undefined) return "never";
    var minutes = Math.max(1, Math.ceil((until - now) / 60000));
    var left = minutes < 120 ? minutes + " min" : minutes < 2880 ? Math.round(minutes / 60) + " h"
      : Math.round(minutes / 1440) + " d";
    return new Date(until).toISOString() + " (in " + left + ")";
  }

  function effect(o) {
    if (o.effect === "limit") return "limit " + o.limit;
    return o.effect + (o.reason ? ": " + o.reason : "");
  }

  function overrides(figures, now) {
    text("overrides-meta", !figures.kept
      ? "this server's store keeps no overrides (docs/overrides.md)"
      : figures.active === 0 ? "none in force"
      : figures.active + " in force" + (figures.active > figures.shown.length
        ? "; the " + figures.shown.length + " expiring first are shown" : "") +
        " (this server's copy, refreshed in the background)");
    rows("overrides", figures.shown, function (o) {
      return [[o.subject], [o.scope === "all" ? "all rules" : o.scope.replace(":", " ")], [effect(o)],
        [expiry(o.until, now)], [o.note || ""], [new Date(o.setAt).toISOString()]];
    });
  }

  function drawChart(series) {
    var x = series.map(function (s) { return s.at; });
    var lines = ACTIONS.map(function (action) {
      return { label: LABELS[action], color: COLORS[action], width: 2,
        values: series.map(function (s) { return s[action]; }) };
    });
    if (chart === undefined) {
      chart = edgelimitChart("chart", { x: x, axis: "time", yLabel: "per second", series: lines,
        width: Math.min(900, window.innerWidth - 60) });
    } else {
      chart.setData([x].concat(lines.map(function (line) { return line.values; })));
    }
  }

  function render(snapshot) {
    var last = snapshot.series.length > 1 ? snapshot.series[snapshot.series.length - 2] : undefined;
    ACTIONS.forEach(function (action) {
      text("total-" + action, snapshot.totals[action]);
      text("rate-" + action, last ? last[action] : 0);
    });
    text("upstream", snapshot.upstream);
    text("store", snapshot.store);
    text("limiting", snapshot.limiting ? "limiting on" : "limiting OFF");
    text("in-flight", snapshot.inFlight);
    text("block-cache-hits", snapshot.blockCacheHits);
    text("total-failed-open", snapshot.decisions.failedOpen);
    text("total-failed-local", snapshot.decisions.failedLocal);
    text("total-shadow", snapshot.decisions.shadowRefusals);
    var shadowByRule = snapshot.decisions.shadowRefusalsByRule;
    var local = snapshot.storeHealth.local;
    text("local-state", local.counting
      ? "counting here now; " + local.owedKeys + " counters owed to the store"
      : local.owedKeys > 0 ? local.owedKeys + " counters owed to the store" : "store failed, counted here");
    var calls = snapshot.storeHealth.calls;
    text("store-calls", calls
      ? "calls: " + calls.state + (calls.openParts.length > 0 ? " (breaker open: " + calls.openParts.join(", ") + ")" : "")
      : "");
    text("store-state", snapshot.storeHealth.state);
    document.getElementById("store-state").className = snapshot.storeHealth.state === "ok" ? "" : "down";
    text("store-error", snapshot.storeHealth.lastError
      ? snapshot.storeHealth.failures + " failed; last: " + snapshot.storeHealth.lastError
      : "no failure");
    text("decision-p50", snapshot.decisions.decisionMs.p50.toFixed(2));
    text("decision-p99", snapshot.decisions.decisionMs.p99.toFixed(2));
    text("decision-count", snapshot.decisions.decisionMs.count);
    drawChart(snapshot.series);
    var minutes = snapshot.topOffendersPeriodMs / 60000;
    text("offenders-window", "last " + minutes + " to " + 2 * minutes + " minutes");
    rows("offenders", snapshot.topOffenders, function (o) { return [[o.key], [o.count, true], [o.error, true]]; });
    rows("lists", snapshot.lists, function (l) {
      return [[l.name], [l.kind], [l.size, true],
        [l.lastRefreshAt ? new Date(l.lastRefreshAt).toISOString() : "never"],
        [l.errors + (l.lastError ? " (" + l.lastError + ")" : ""), true]];
    });
    overrides(snapshot.overrides, snapshot.now);
    var policy = snapshot.policy;
    text("policy-meta", "client address: " + policy.clientAddress + "; decision budget " + policy.budgetMs +
      " ms; fail closed on " + (policy.failClosedPaths.join(", ") || "nothing") +
      "; loaded " + new Date(snapshot.policyLoadedAt).toISOString());
    rows("rules", policy.rules, function (r) {
      return [[r.id + (r.shadow ? " (shadow)" : "")],
        [r.tiers.join(", ") + (r.plans ? " plan " + r.plans.join("|") : "")],
        [(r.methods ? r.methods.join("|") + " " : "") + r.path], [r.key],
        [r.limit + " / " + r.window, true], [r.algorithm], [r.action], [r.failMode],
        [Object.prototype.hasOwnProperty.call(shadowByRule, r.id) ? shadowByRule[r.id] : r.shadow ? 0 : "", true]];
    });
  }

  // The first frame is the snapshot the page was served with: numbers at once, not zeros
  // until the live feed connects (or if it never does, behind a proxy that buffers it).
  render(JSON.parse(document.getElementById("first-snapshot").textContent));

  var source = new EventSource("/events");
  source.onmessage = function (event) {
    text("status", "live");
    document.getElementById("status").className = "";
    render(JSON.parse(event.data));
  };
  source.onerror = function () {
    text("status", "disconnected, retrying");
    document.getElementById("status").className = "down";
  };
})();
`;
}

/**
 * A snapshot as the text of a `<script type="application/json">`: data, never run (the page's
 * CSP allows no inline script), and with every `<` escaped so that no value (an offender key is
 * whatever a client wrote) can close the element or open a comment.
 */
function snapshotData(snapshot: GatewaySnapshot): string {
  return JSON.stringify(snapshot).replace(/</g, "\\u003c");
}
