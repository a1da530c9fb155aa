// Reads the samples gateway-perf.sh wrote (`<dir>/<run>.samples`: "count symbol" lines from
// `perf report --sort sym`, and `<dir>/<run>.requests`) and prints µs per request by category
// for every run, then the symbols whose time differs most between the limited and the no-limit
// runs, summed over the rounds.
//
//   node tools/profiling/perf-categories.mjs <dir> <build-dir> <run>...    (runs named no-limit-N and
//       limited-N; JavaScript under <build-dir> counts as ours)
import { readFileSync } from "node:fs";

const [dir, build, ...runs] = process.argv.slice(2);
if (dir === undefined || build === undefined || runs.length === 0) {
  console.error("usage: perf-categories.mjs <dir> <build-dir> <run>...");
  process.exit(2);
}
/** One sample of cpu-clock at 4,000 Hz. */
const MICROS_PER_SAMPLE = 250;

/** The category of a perf symbol ("[.] name" in user space, "[k] name" in the kernel). */
function category(symbol) {
  if (symbol.startsWith("[k]")) return "kernel";
  const name = symbol.slice(4);
  if (name.startsWith("JS:") || name.startsWith("LazyCompile:")) {
    if (name.startsWith("JS:RegExp") || name.includes("RegExp:")) return "regexp";
    if (name.includes(`${build}/`)) return "ours (JS)";
    if (name.includes("node_modules")) return "packages (JS)";
    return "node (JS)";
  }
  if (name.startsWith("RegExp:")) return "regexp";
  if (name.startsWith("Builtins_")) return "V8 builtins";
  if (
    /Scaveng|MarkCompact|Sweep|Evacuat|Marking|Heap::|NewSpace|PagedSpace|Worklist|SlotSet/.test(
      name,
    )
  ) {
    return "GC";
  }
  if (/^(v8::|void v8::)/.test(name)) return "V8 runtime";
  if (/^(node::|uv_|uv__|llhttp)/.test(name)) return "node (C++)";
  return "libc and other";
}

function load(run) {
  const requests = Number(readFileSync(`${dir}/${run}.requests`, "utf8").trim());
  const bySymbol = new Map();
  for (const line of readFileSync(`${dir}/${run}.samples`, "utf8").split("\n")) {
    const match = /^\s*(\d+)\s+(.*)$/.exec(line);
    if (match === null) continue;
    const symbol = (match[2] ?? "").trim();
    const micros = (Number(match[1]) * MICROS_PER_SAMPLE) / requests;
    bySymbol.set(symbol, (bySymbol.get(symbol) ?? 0) + micros);
  }
  return { run, requests, bySymbol };
}

const loaded = runs.map(load);
const categories = [
  "ours (JS)",
  "node (JS)",
  "packages (JS)",
  "V8 builtins",
  "regexp",
  "V8 runtime",
  "GC",
  "node (C++)",
  "libc and other",
  "kernel",
];
const byCategory = (run) => {
  const sums = new Map(categories.map((name) => [name, 0]));
  for (const [symbol, micros] of run.bySymbol) {
    const name = category(symbol);
    sums.set(name, (sums.get(name) ?? 0) + micros);
  }
  return sums;
};
const f2 = (value) => value.toFixed(2);
console.log(
  `µs of CPU per request by category${" ".repeat(4)}${loaded.map((run) => run.run.padStart(12)).join("")}`,
);
const sums = loaded.map(byCategory);
for (const name of categories) {
  console.log(
    `  ${name.padEnd(36)}${sums.map((sum) => f2(sum.get(name) ?? 0).padStart(12)).join("")}`,
  );
}
console.log(
  `  ${"total".padEnd(36)}${sums.map((sum) => f2([...sum.values()].reduce((a, b) => a + b, 0)).padStart(12)).join("")}`,
);
console.log(
  `  ${"requests sampled".padEnd(36)}${loaded.map((run) => String(run.requests).padStart(12)).join("")}`,
);

// The rounds summed per gateway: each gateway's µs per request, averaged over its runs.
const mean = (prefix) => {
  const chosen = loaded.filter((run) => run.run.startsWith(prefix));
  const total = new Map();
  for (const run of chosen) {
    for (const [symbol, micros] of run.bySymbol) {
      total.set(symbol, (total.get(symbol) ?? 0) + micros / chosen.length);
    }
  }
  return total;
};
const off = mean("no-limit-");
const on = mean("limited-");
const symbols = [...new Set([...off.keys(), ...on.keys()])];
const difference = (symbol) => (on.get(symbol) ?? 0) - (off.get(symbol) ?? 0);
symbols.sort((a, b) => difference(b) - difference(a));
console.log("");
console.log("largest differences, limited minus no-limit (µs per request, mean of the rounds):");
for (const symbol of symbols.slice(0, 25)) {
  console.log(
    `  ${(difference(symbol) >= 0 ? "+" : "") + f2(difference(symbol))}`.padEnd(10) +
      `${f2(off.get(symbol) ?? 0).padStart(7)} ${f2(on.get(symbol) ?? 0).padStart(7)}  [${category(symbol)}] ${symbol.slice(4, 110)}`,
  );
}
