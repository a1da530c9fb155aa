// Inclusive instructions per request of each call, by caller and callee, JavaScript named: what
// a function costs with everything it calls (a builtin, Node, pino), which the self costs of
// callgrind-by-function.mjs spread over many names.
//
//   node tools/profiling/callgrind-callers.mjs <callgrind.out> <perf-PID.map> <requests> [callee-regex] [caller-regex]
//
// Both regular expressions filter (default: everything); the 60 largest pairs are printed.
// Example, what our code calls: ... 10000 . 'core/|stores/|gateway/'. The profile must have been
// taken with `--dump-instr=yes` (gateway-instructions.sh does; GATEWAY_INSTRUCTIONS_KEEP
// keeps the profiles and maps). Each `calls=` line is followed by the call site's address and
// the call's inclusive cost; call sites and callees inside V8's compiled code are named through
// the perf map, the rest by the function callgrind was in.
import { readFileSync } from "node:fs";

const [outFile, mapFile, requestsText, calleeText = ".", callerText = "."] = process.argv.slice(2);
if (outFile === undefined || mapFile === undefined || requestsText === undefined) {
  console.error(
    "usage: callgrind-callers.mjs <callgrind.out> <perf-PID.map> <requests> [callee-regex] [caller-regex]",
  );
  process.exit(2);
}
const requests = Number(requestsText);
const calleePattern = new RegExp(calleeText);
const callerPattern = new RegExp(callerText);

// V8's perf map: "start size name" per compiled function, sorted for a binary search.
const compiled = readFileSync(mapFile, "utf8")
  .split("\n")
  .map((line) => /^([0-9a-f]+) ([0-9a-f]+) (.*)$/.exec(line))
  .filter((match) => match !== null)
  .map((match) => ({
    start: Number.parseInt(match[1], 16),
    end: Number.parseInt(match[1], 16) + Number.parseInt(match[2], 16),
    name: match[3].replace(
      /file:\/\/\S*?\/(core|stores|gateway|http|metrics|policy|challenge|cli|adapters)\//,
      "$1/",
    ),
  }))
  .sort((a, b) => a.start - b.start);

function compiledAt(address) {
  let low = 0;
  let high = compiled.length - 1;
  while (low <= high) {
    const middle = (low + high) >> 1;
    const entry = compiled[middle];
    if (address < entry.start) high = middle - 1;
    else if (address >= entry.end) low = middle + 1;
    else return entry.name;
  }
  return undefined;
}

// Callgrind compresses names: "(id) name" the first time, "(id)" afterwards.
const names = new Map();
function nameOf(text) {
  const match = /^\((\d+)\)(?: (.*))?$/.exec(text.trim());
  if (match === null) return text.trim();
  if (match[2] !== undefined) names.set(match[1], match[2]);
  const name = names.get(match[1]) ?? "?";
  // Code V8 compiled is named by its address: look it up.
  const address = /^0x([0-9a-f]+)/.exec(name);
  return address === null ? name : (compiledAt(Number.parseInt(address[1], 16)) ?? name);
}

const costs = new Map();
let fn = "?";
let callee = "?";
let address = 0;
let pendingCall = false;
for (const line of readFileSync(outFile, "utf8").split("\n")) {
  if (line.startsWith("fn=")) fn = nameOf(line.slice(3));
  else if (line.startsWith("cfn=")) callee = nameOf(line.slice(4));
  else if (line.startsWith("calls=")) pendingCall = true;
  else if (/^[0-9+\-*]/.test(line)) {
    const fields = line.split(" ");
    const position = fields[0];
    if (position.startsWith("0x")) address = Number.parseInt(position, 16);
    else if (position.startsWith("+")) address += Number(position.slice(1));
    else if (position.startsWith("-")) address -= Number(position.slice(1));
    if (pendingCall) {
      pendingCall = false;
      const caller = compiledAt(address) ?? fn;
      if (calleePattern.test(callee) && callerPattern.test(caller)) {
        const key = `${callee}\u0000${caller}`;
        costs.set(key, (costs.get(key) ?? 0) + Number(fields[fields.length - 1]));
      }
    }
  }
}

console.log("instructions per request (inclusive)  callee  <-  caller");
for (const [key, cost] of [...costs].sort((a, b) => b[1] - a[1]).slice(0, 60)) {
  const [to, from] = key.split("\u0000");
  console.log(
    `${(cost / requests).toFixed(0).padStart(8)}  ${to.slice(0, 70).padEnd(70)}  <-  ${from.slice(0, 70)}`,
  );
}
