// Instructions per request by function, JavaScript included, from a callgrind profile taken
// with `--dump-instr=yes` of a node started with `--perf-basic-prof`.
//
//   node tools/profiling/callgrind-by-function.mjs <callgrind.out> <perf-PID.map> <requests> > out.json
//
// Callgrind cannot name code that V8 compiled at run time: it lumps it into whatever function
// it last knew. With `--dump-instr=yes` every cost line carries its instruction address, and
// V8's perf map (`/tmp/perf-<pid>.map`, "start size name" per compiled function) names the
// address. Costs outside the node binary's own symbols are looked up there; costs of calls are
// skipped (only self cost is summed, so the figures add up to the total).
//
// Output, per request: { total (instructions), totals (every event), byFunction: { name:
// instructions }, misses: { name: { event: count } } (only with --cache-sim=yes) }, names with
// V8's tier marker and the `JS:` prefix removed.
import { readFileSync } from "node:fs";

const [profilePath, mapPath, requestsText] = process.argv.slice(2);
const requests = Number(requestsText);
if (profilePath === undefined || mapPath === undefined || !(requests > 0)) {
  console.error("usage: callgrind-by-function.mjs <callgrind.out> <perf.map> <requests>");
  process.exit(2);
}

// The perf map: later lines win where code was compiled again at the same address.
const ranges = [];
const mapLines = readFileSync(mapPath, "utf8").split("\n");
for (let i = 0; i < mapLines.length; i++) {
  const line = mapLines[i];
  const first = line.indexOf(" ");
  const second = line.indexOf(" ", first + 1);
  if (first < 0 || second < 0) continue;
  const start = Number.parseInt(line.slice(0, first), 16);
  const size = Number.parseInt(line.slice(first + 1, second), 16);
  ranges.push({ start, end: start + size, order: i, name: cleanName(line.slice(second + 1)) });
}
ranges.sort((a, b) => a.start - b.start);
const starts = ranges.map((range) => range.start);

function cleanName(name) {
  return name.replace(/^(JS|LazyCompile|Function|Builtin|Script|Eval):?\s*[*~^+]?/, "").trim();
}

function jsNameAt(address) {
  let low = 0;
  let high = starts.length - 1;
  let at = -1;
  while (low <= high) {
    const mid = (low + high) >> 1;
    if (starts[mid] <= address) {
      at = mid;
      low = mid + 1;
    } else high = mid - 1;
  }
  let best;
  // Ranges can overlap (code compiled again): the latest covering one names the address.
  for (let i = at; i >= 0 && i > at - 64; i--) {
    const range = ranges[i];
    if (
      range.start <= address &&
      address < range.end &&
      (best === undefined || range.order > best.order)
    ) {
      best = range;
    }
  }
  return best?.name;
}

const fnNames = new Map();
const objectNames = new Map();
function compressed(table, text) {
  const match = /^\((\d+)\)(?: (.*))?$/.exec(text);
  if (match === null) return text;
  if (match[2] !== undefined) table.set(match[1], match[2]);
  return table.get(match[1]) ?? "?";
}

// Events as the profile lists them: "Ir" alone, or with --cache-sim=yes also the simulated
// first-level misses (I1mr, D1mr, D1mw) and last-level ones.
let events = ["Ir"];
const cost = new Map();
let object = "";
let fn = "";
let last = 0;
let callLine = false;
for (const line of readFileSync(profilePath, "utf8").split("\n")) {
  if (line.startsWith("events:")) events = line.slice(7).trim().split(/\s+/);
  else if (line.startsWith("fn=")) fn = compressed(fnNames, line.slice(3));
  else if (line.startsWith("ob=")) object = compressed(objectNames, line.slice(3));
  else if (line.startsWith("cfn=")) compressed(fnNames, line.slice(4));
  else if (line.startsWith("cob=")) compressed(objectNames, line.slice(4));
  else if (line.startsWith("calls=")) callLine = true;
  else if (/^[0-9+*-]/.test(line)) {
    const parts = line.split(" ");
    const position = parts[0];
    let address;
    if (position.startsWith("0x")) address = Number.parseInt(position, 16);
    else if (position.startsWith("+")) address = last + Number(position.slice(1));
    else if (position.startsWith("-")) address = last - Number(position.slice(1));
    else if (position === "*") address = last;
    else address = Number(position);
    last = address;
    if (callLine) {
      callLine = false;
      continue;
    }
    // Positions are "instruction line", then the costs in `events` order (trailing zeros left out).
    if (parts.length < 3) continue;
    let name = fn;
    if (!object.endsWith("/node")) name = jsNameAt(address) ?? fn;
    let sums = cost.get(name);
    if (sums === undefined) {
      sums = new Array(events.length).fill(0);
      cost.set(name, sums);
    }
    for (let i = 2; i < parts.length && i - 2 < events.length; i++) sums[i - 2] += Number(parts[i]);
  }
}

const perRequest = (value) => Math.round((value / requests) * 10) / 10;
const total = {};
for (let i = 0; i < events.length; i++) {
  let sum = 0;
  for (const sums of cost.values()) sum += sums[i];
  total[events[i]] = perRequest(sum);
}
// byFunction: instructions; misses (with --cache-sim=yes): the other events by function.
const byFunction = {};
const misses = {};
for (const [name, sums] of [...cost].sort((a, b) => b[1][0] - a[1][0])) {
  byFunction[name] = perRequest(sums[0]);
  if (events.length > 1) {
    const rest = {};
    for (let i = 1; i < events.length; i++) if (sums[i] > 0) rest[events[i]] = perRequest(sums[i]);
    misses[name] = rest;
  }
}
process.stdout.write(
  `${JSON.stringify({ events, total: total.Ir, totals: total, byFunction, misses }, null, 1)}\n`,
);
