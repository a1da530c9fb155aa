#!/usr/bin/env bash
# What limiting costs inside the gateway, measured where wall-clock CPU-per-request runs on a
# shared machine cannot resolve it:
#   1. the decision and the bookkeeping timed in place: a temporary copy of the built gateway
#      with performance.now() around `limiter.decide` and `#record` in the request handler,
#      under wrk (returning clients, as bench/gateway.bench.ts); p50/p90/mean per 20,000
#      requests. The two timer reads add about 0.2 µs to each figure. Then the same with the
#      anonymous limits raised, for 10,000 clients and for 100: what the client state's share
#      of the cache costs the decision.
#   2. bytes allocated per request, limiting on and off: V8's sampling heap profiler (every
#      128 bytes, objects already collected included) over a wrk run, by allocating function.
#   3. the proxy's work for the headers timed in place: the upstream dispatch, `writeHead` and
#      the body write, in --no-limit, headers-only (bench/patch-headers-only.mjs) and
#      limited copies of the build.
#
#   bash bench/gateway-inside.sh [dist-dir]     (default dist/, built first; needs wrk and python3)
#
# To compare with an older commit: git archive REV | tar -x -C /tmp/old && (cd /tmp/old &&
# ln -s "$PWD/node_modules" . && npx tsc -p .) then pass /tmp/old/dist.
set -euo pipefail
cd "$(dirname "$0")/.."
dist=${1:-}
if [ -z "$dist" ]; then npm run build >/dev/null; dist=dist; fi
dist=$(cd "$dist" && pwd)
work=$(mktemp -d)
# Copies of the build resolve their packages from here.
ln -s "$PWD/node_modules" "$work/node_modules"
# shellcheck source=bench/gateway-common.sh
source bench/gateway-common.sh
# Timers go into copies of the build by exact lines: a line that moved stops the script.
cat > "$work/patch.py" <<'PY'
import sys

def patch(path, edits):
    source = open(path).read()
    for old, new in edits:
        if old not in source:
            sys.exit(f"gateway-inside: cannot find the line to time in {path}: {old.strip()}")
        source = source.replace(old, new, 1)
    open(path, "w").write(source)
PY
start_upstream
# One copy of the gateway under wrk (returning clients, 16 connections, 10 s): wrk's req/s goes
# to $work/rps, the gateway's stderr (where the timers report) to $work/<label>.err.
timed_run() {
  local label=$1 entry=$2 policy=$3 script=$4
  shift 4
  local port
  port=$(free_port)
  node "$entry" serve --policy "$policy" --upstream "http://127.0.0.1:$upstream_port" \
    --port "$port" --host 127.0.0.1 --admin-port 0 "$@" >/dev/null 2>"$work/$label.err" &
  local gateway=$!
  pids+=($gateway)
  sleep 1.5
  wrk -t1 -c16 -d10s -s "$script" "http://127.0.0.1:$port" | awk '/Requests\/sec/{print $2}' > "$work/rps"
  kill "$gateway"; wait "$gateway" 2>/dev/null || true
}

# 1. In-place timings of the decision and the bookkeeping.
cp -r "$dist" "$work/timed"
python3 - "$work/timed/gateway/server.js" "$work" <<'PY'
import sys
sys.path.insert(0, sys.argv[2])
from patch import patch
path = sys.argv[1]
helper = '''
const __T = { d: new Float64Array(20000), r: new Float64Array(20000), n: 0 };
function __report() {
  const q = (a) => { const s = Float64Array.from(a).sort(); return `p50 ${(s[10000] * 1000).toFixed(2)} p90 ${(s[18000] * 1000).toFixed(2)} mean ${(s.reduce((x, y) => x + y, 0) / s.length * 1000).toFixed(2)}`; };
  console.error(`decide ${q(__T.d)} | record ${q(__T.r)} (µs)`);
}
'''
patch(path, [
    ("const NO_HEADERS", helper + "const NO_HEADERS"),
    ("            const decided = this.#limiter.decide({", "            const __t0 = performance.now();\n            const decided = this.#limiter.decide({"),
    ("            this.#record(verdict, req.method);", "            const __t1 = performance.now();\n            this.#record(verdict, req.method);\n            const __t2 = performance.now(); __T.d[__T.n] = __t1 - __t0; __T.r[__T.n] = __t2 - __t1; if (++__T.n === 20000) { __report(); __T.n = 0; }"),
])
PY
timed_run timed "$work/timed/cli/main.js" examples/policies/cloudfront.yaml "$work/returning.lua"
echo "in place, limited gateway ($(cat "$work/rps") req/s):"
sed 's/^/  /' "$work/timed.err"

# 1b. The same timers with 10,000 clients and with 100, under a copy of the policy whose
#     anonymous limits are raised so that nobody is refused: the same code path, a different
#     amount of client state to keep in cache. Mirrored order; the last window of each run.
sed -e 's/global: { limit: 60,/global: { limit: 60000000,/' -e 's|^      /api/search: 30$|      /api/search: 30000000|' \
  examples/policies/cloudfront.yaml > "$work/unrefused.yaml"
if [ "$(grep -c '60000000\|30000000' "$work/unrefused.yaml")" != 2 ]; then
  echo "gateway-inside: cannot raise the example policy's anonymous limits" >&2
  exit 1
fi
sed 's/% 10000/% 100/' "$work/returning.lua" > "$work/returning-100.lua"
echo "in place, limits raised, by number of clients:"
for clients in 10000 100 100 10000; do
  script="$work/returning.lua"
  [ "$clients" = 100 ] && script="$work/returning-100.lua"
  timed_run timed "$work/timed/cli/main.js" "$work/unrefused.yaml" "$script"
  printf '  %6s clients %9s req/s  %s\n' "$clients" "$(cat "$work/rps")" "$(tail -1 "$work/timed.err")"
done

# 2. Bytes allocated per request.
cat > "$work/heap.mjs" <<'JS'
import { Session } from "node:inspector";
import { writeFileSync } from "node:fs";
const session = new Session();
session.connect();
process.on("SIGUSR2", () => session.post("HeapProfiler.startSampling", { samplingInterval: 128, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true }));
process.on("exit", () => session.post("HeapProfiler.stopSampling", (error, result) => { if (result) writeFileSync(process.env.HEAP_OUT, JSON.stringify(result.profile)); }));
await import(process.env.GATEWAY_ENTRY);
JS
for mode in off on; do
  flag=()
  [ "$mode" = off ] && flag=(--no-limit)
  port=$(free_port)
  HEAP_OUT="$work/heap-$mode.json" GATEWAY_ENTRY="$dist/cli/main.js" node "$work/heap.mjs" serve \
    --policy examples/policies/cloudfront.yaml --upstream "http://127.0.0.1:$upstream_port" \
    --port "$port" --host 127.0.0.1 --admin-port 0 "${flag[@]}" >/dev/null 2>&1 &
  gateway=$!
  pids+=($gateway)
  sleep 1.5
  wrk -t1 -c32 -d4s -s "$work/returning.lua" "http://127.0.0.1:$port" >/dev/null
  kill -USR2 "$gateway"; sleep 0.2
  wrk -t1 -c32 -d5s -s "$work/returning.lua" "http://127.0.0.1:$port" | awk '/requests in/{print $1}' > "$work/requests-$mode"
  kill "$gateway"; wait "$gateway" 2>/dev/null || true
done
node - "$work" <<'JS'
const fs = require("node:fs");
const work = process.argv[2];
const load = (mode) => {
  const profile = JSON.parse(fs.readFileSync(`${work}/heap-${mode}.json`));
  const requests = Number(fs.readFileSync(`${work}/requests-${mode}`, "utf8"));
  const bySite = new Map();
  let total = 0;
  const walk = (node) => {
    const frame = node.callFrame;
    const site = `${frame.functionName || "(anonymous)"} ${frame.url.replace(/.*\//, "")}:${frame.lineNumber + 1}`;
    total += node.selfSize;
    if (node.selfSize > 0) bySite.set(site, (bySite.get(site) ?? 0) + node.selfSize);
    for (const child of node.children) walk(child);
  };
  walk(profile.head);
  return { perRequest: total / requests, bySite, requests };
};
const off = load("off");
const on = load("on");
console.log(`bytes allocated per request: --no-limit ${off.perRequest.toFixed(0)}, limited ${on.perRequest.toFixed(0)} (+${(on.perRequest - off.perRequest).toFixed(0)})`);
const sites = new Set([...off.bySite.keys(), ...on.bySite.keys()]);
const rows = [...sites]
  .map((site) => [site, (on.bySite.get(site) ?? 0) / on.requests - (off.bySite.get(site) ?? 0) / off.requests])
  .sort((a, b) => b[1] - a[1])
  .slice(0, 12);
console.log("largest differences by allocating function (bytes per request, limited minus off; sampled):");
for (const [site, bytes] of rows) console.log(`  ${bytes.toFixed(0).padStart(6)}  ${site}`);
JS

# 3. The proxy's own work for the headers, timed in place: performance.now() around the upstream
#    dispatch (undici validates and writes the request head: the origin header), `writeHead`
#    (Node validates and stores each response header) and each write of the body (one per
#    response here; the first one joins the head and sends it), in three copies of the build:
#    --no-limit, headers-only (the same plus the limited gateway's headers:
#    bench/patch-headers-only.mjs) and limited. Two passes, the second in reverse order.
for variant in no-limit headers-only limited; do
  cp -r "$dist" "$work/$variant"
  python3 - "$work/$variant/gateway/proxy.js" "$work" <<'PY'
import sys
sys.path.insert(0, sys.argv[2])
from patch import patch
path = sys.argv[1]
helper = '''
const __T = { d: new Float64Array(20000), h: new Float64Array(20000), w: new Float64Array(20000), dn: 0, hn: 0, wn: 0 };
function __report() {
  const q = (a) => { const s = Float64Array.from(a).sort(); return `p50 ${(s[10000] * 1000).toFixed(2)} mean ${(s.reduce((x, y) => x + y, 0) / s.length * 1000).toFixed(2)}`; };
  console.error(`dispatch ${q(__T.d)} | writeHead ${q(__T.h)} | body write ${q(__T.w)} (µs)`);
}
'''
patch(path, [
    ("const HOP_BY_HOP", helper + "const HOP_BY_HOP"),
    ("            this.#pool.dispatch({", "            const __t0 = performance.now();\n            this.#pool.dispatch({"),
    ("new Exchange(res, clientHeaders, onFailure, resolve));", "new Exchange(res, clientHeaders, onFailure, resolve));\n            __T.d[__T.dn++ % 20000] = performance.now() - __t0;"),
    ("        this.#res.writeHead(statusCode, responseHeaders(headers, this.#clientHeaders));", "        const __t1 = performance.now();\n        this.#res.writeHead(statusCode, responseHeaders(headers, this.#clientHeaders));\n        __T.h[__T.hn++ % 20000] = performance.now() - __t1;"),
    ("        if (!this.#res.write(chunk)) {", "        const __t2 = performance.now();\n        const __written = this.#res.write(chunk);\n        __T.w[__T.wn++ % 20000] = performance.now() - __t2;\n        if (__T.wn % 20000 === 0) __report();\n        if (!__written) {"),
])
PY
done
node bench/patch-headers-only.mjs "$work/headers-only"
echo "the proxy's header work in place (µs per request; each line one 10 s wrk run, the last window of 20,000 responses):"
for variant in no-limit headers-only limited limited headers-only no-limit; do
  flag=()
  [ "$variant" != limited ] && flag=(--no-limit)
  timed_run "$variant" "$work/$variant/cli/main.js" examples/policies/cloudfront.yaml "$work/returning.lua" "${flag[@]}"
  printf '  %-13s %8s req/s  %s\n' "$variant" "$(cat "$work/rps")" "$(tail -1 "$work/$variant.err")"
done
