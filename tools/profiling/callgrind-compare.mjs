// Compares gateways profiled by callgrind-by-function.mjs: instructions per request split
// into GC, V8's optimizing compiler and the rest, then the functions whose cost differs most
// from the first gateway's (the baseline), GC and compiler left out.
//
//   node tools/profiling/callgrind-compare.mjs baseline.json other.json [more.json ...]
import { readFileSync } from "node:fs";
import { basename } from "node:path";

const GC =
  /Scaveng|Marking|Sweeper|MarkCompact|Evacuat|RememberedSet|SlotSet|Compactor|PointersUpdating|MinorMC|BodyDescriptor|PagedSpace|FreeList|LiveObjectRange|IterateObjectCache|RelocIterator|SizeFromMap|ActiveSystemPages|popcount|Heap::|heap::/;
const COMPILER = /v8::internal::compiler::|v8::internal::maglev::|wasm::|Pipeline|Turbofan/;

function kind(name) {
  if (GC.test(name)) return "gc";
  if (COMPILER.test(name)) return "compiler";
  return "rest";
}

/** Paths made short: `file:///.../dist/core/engine.js:88:15` -> `core/engine.js:88`. */
function shortName(name) {
  return name
    .replace(
      /file:\/\/\S*?\/(core|stores|gateway|http|metrics|policy|challenge|cli|adapters)\//,
      "$1/",
    )
    .replace(/\S*\/node_modules\//, "")
    .replace(/:(\d+):\d+$/, ":$1")
    .slice(0, 90);
}

/** One cost per function, split into GC, compiler and the rest (the rest by short name). */
function splitCosts(costs) {
  const split = { gc: 0, compiler: 0, rest: 0 };
  const rest = new Map();
  for (const [name, cost] of Object.entries(costs)) {
    const k = kind(name);
    split[k] += cost;
    if (k === "rest") {
      const short = shortName(name);
      rest.set(short, (rest.get(short) ?? 0) + cost);
    }
  }
  return { split, rest };
}

const gateways = process.argv.slice(2).map((path) => {
  const { total, byFunction, misses } = JSON.parse(readFileSync(path, "utf8"));
  // First-level cache misses per function (instruction and data), when simulated.
  let firstLevel;
  if (misses !== undefined && Object.keys(misses).length > 0) {
    const costs = {};
    for (const [name, events] of Object.entries(misses)) {
      costs[name] = (events.I1mr ?? 0) + (events.D1mr ?? 0) + (events.D1mw ?? 0);
    }
    firstLevel = splitCosts(costs);
  }
  return { label: basename(path, ".json"), total, ...splitCosts(byFunction), firstLevel };
});
const [base, ...others] = gateways;
if (base === undefined || others.length === 0) {
  console.error("usage: callgrind-compare.mjs baseline.json other.json [...]");
  process.exit(2);
}

const n = (value) => Math.round(value).toLocaleString("en-US");
const pct = (value, of) => `${value >= 0 ? "+" : ""}${((value / of) * 100).toFixed(1)}%`;
console.log(
  `\ninstructions per request        total        GC  compiler      rest   rest vs ${base.label}`,
);
for (const g of gateways) {
  const versus =
    g === base
      ? ""
      : `${n(g.split.rest - base.split.rest).padStart(8)} ${pct(g.split.rest - base.split.rest, base.split.rest)}`;
  console.log(
    `  ${g.label.padEnd(28)}${n(g.total).padStart(8)}${n(g.split.gc).padStart(10)}${n(g.split.compiler).padStart(10)}${n(g.split.rest).padStart(10)}   ${versus}`,
  );
}
function largestDifferences(title, baseRest, otherRest) {
  const names = new Set([...baseRest.keys(), ...otherRest.keys()]);
  const rows = [...names]
    .map((name) => [name, (otherRest.get(name) ?? 0) - (baseRest.get(name) ?? 0)])
    .sort((a, b) => b[1] - a[1]);
  console.log(`\n${title}, largest differences (GC and compiler left out):`);
  for (const [name, diff] of rows.slice(0, 25)) console.log(`  ${n(diff).padStart(7)}  ${name}`);
}

for (const g of others) largestDifferences(`${g.label} minus ${base.label}`, base.rest, g.rest);

// With --cache-sim=yes: the simulated first-level cache misses (I1 + D1, reads and writes).
if (gateways.every((g) => g.firstLevel !== undefined)) {
  console.log(
    `\nfirst-level cache misses per request (simulated)   GC+compiler      rest   rest vs ${base.label}`,
  );
  const baseRest = base.firstLevel.split.rest;
  for (const g of gateways) {
    const { split } = g.firstLevel;
    const versus =
      g === base
        ? ""
        : `${n(split.rest - baseRest).padStart(8)} ${pct(split.rest - baseRest, baseRest)}`;
    console.log(
      `  ${g.label.padEnd(48)}${n(split.gc + split.compiler).padStart(11)}${n(split.rest).padStart(10)}   ${versus}`,
    );
  }
  for (const g of others) {
    largestDifferences(
      `first-level misses, ${g.label} minus ${base.label}`,
      base.firstLevel.rest,
      g.firstLevel.rest,
    );
  }
}
