#!/usr/bin/env bash
# Instructions per request of `edgelimit serve`, counted by valgrind's callgrind, and where the
# difference between gateways lies, function by function (our JavaScript included). Machine
# load does not change instruction counts, so this resolves differences that wall-clock
# benchmarks on a shared machine cannot (it does not see the kernel, nor cache misses unless asked).
#
#   bash bench/gateway-instructions.sh [requests] [dist-dir]
#       (default 10000 requests and dist/; needs valgrind and a build: npm run build, or another
#       commit's build for a before/after pair; about 3 minutes per gateway; set
#       GATEWAY_INSTRUCTIONS_KEEP=<dir> to keep each gateway's by-function JSON, profile and perf
#       map (bench/callgrind-callers.mjs reads the last two: what each call costs, inclusive), and
#       GATEWAY_INSTRUCTIONS_CACHE=1 to count simulated cache misses too)
#
# Three gateways, one at a time (runs made at the same time do not reproduce):
#   no-limit      `serve --no-limit`: the proxy alone
#   headers-only  the same, from a temporary copy of the build whose --no-limit path adds the
#                 headers the limited gateway adds (bench/patch-headers-only.mjs): what Node and
#                 undici charge for the headers, without a decision.
#   limited       `serve`, memory store, examples/policies/cloudfront.yaml with its default
#                 window made a day (below)
# Each runs under callgrind with `--single-threaded` (V8's background work on the main thread,
# for repeatability) and `--perf-basic-prof` (V8's map of the code it compiles, which names the
# JavaScript that callgrind cannot: bench/callgrind-by-function.mjs), takes
# GATEWAY_INSTRUCTIONS_WARMUP warm-up requests (default 40,000) from 10,000 returning clients
# (X-Forwarded-For from loopback, as in bench/gateway.bench.ts), then the counters are zeroed and
# the measured requests sent, 8 at a time over keep-alive. The warm-up brings every client back
# four times, so its store entries are past their first-visit and promotion steps and the
# limited path runs in V8's optimized code. (After 12,000 requests, the warm-up until
# 2026-12-01, parts of it still ran in V8's baseline tier, and most measured requests were a
# client's second: the memory store's promotion.) GC and V8's optimizing compiler are reported
# apart: under valgrind they run on the main thread and far more often per request than at full
# speed, and a major GC lands in one run and not the next.
# The policy's 60 s windows are made a day. Under valgrind a client comes back every 100 s or so,
# past its window, so every request would be its first of a new window, and the sweep that runs on
# each insert drops other idle clients' expired counters, which then insert again: a run of
# inserts. At full speed the same clients come back within their window (bench/gateway.bench.ts).
set -euo pipefail
cd "$(dirname "$0")/.."
requests=${1:-10000}
warmup=${GATEWAY_INSTRUCTIONS_WARMUP:-40000}
dist=${2:-dist}
# GATEWAY_INSTRUCTIONS_CACHE=1: also simulate the first-level caches (--cache-sim=yes, sizes
# from this machine's CPU; about twice as slow) and compare the misses function by function.
cache_sim=()
[ -n "${GATEWAY_INSTRUCTIONS_CACHE:-}" ] && cache_sim=(--cache-sim=yes)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The copy of the build resolves its packages from here.
ln -s "$PWD/node_modules" "$work/node_modules"
sed 's/^  window: 60s$/  window: 1d/' examples/policies/cloudfront.yaml > "$work/policy.yaml"
grep -q '^  window: 1d$' "$work/policy.yaml" || { echo "cannot find the default window in the example policy" >&2; exit 1; }
cat > "$work/load.mjs" <<'JS'
import http from "node:http";
const [port, total] = [Number(process.argv[2]), Number(process.argv[3])];
const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
let sent = 0;
let done = 0;
function next() {
  if (sent >= total) return;
  const i = sent++ % 10000;
  const headers = { "x-forwarded-for": `10.9.${Math.floor(i / 250)}.${(i % 250) + 1}` };
  http
    .get({ host: "127.0.0.1", port, path: "/api/search?q=shoes", agent, headers }, (res) => {
      res.resume();
      res.on("end", () => (++done === total ? agent.destroy() : next()));
    })
    .on("error", (error) => {
      console.error(error.message);
      process.exit(1);
    });
}
for (let k = 0; k < 8; k++) next();
JS
free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
upstream_port=$(free_port)
node -e "require('node:http').createServer((q, r) => { r.writeHead(200, { 'content-type': 'application/json' }); r.end('{\"ok\":true,\"items\":[1,2,3]}'); }).listen($upstream_port, '127.0.0.1')" &
upstream=$!
cp -r "$dist" "$work/headers-only"
node bench/patch-headers-only.mjs "$work/headers-only"
measure() {
  local label=$1 build=$2; shift 2
  local port; port=$(free_port)
  local out="$work/$label.out"
  EDGELIMIT_JWT_SECRET=bench-secret-not-used-by-anonymous-traffic \
  EDGELIMIT_CHALLENGE_SECRET=bench-challenge-secret-not-used \
    valgrind --tool=callgrind --smc-check=all --dump-instr=yes "${cache_sim[@]}" --callgrind-out-file="$out" \
    node --single-threaded --perf-basic-prof "$build/cli/main.js" serve \
    --policy "$work/policy.yaml" --upstream "http://127.0.0.1:$upstream_port" \
    --port "$port" --host 127.0.0.1 --admin-port 0 "$@" >/dev/null 2>&1 &
  local gateway=$!
  for _ in $(seq 120); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 1; done
  node "$work/load.mjs" "$port" "$warmup"
  callgrind_control -z "$gateway" >/dev/null 2>&1
  node "$work/load.mjs" "$port" "$requests"
  callgrind_control -d "$gateway" >/dev/null 2>&1
  cp "/tmp/perf-$gateway.map" "$work/$label.map"
  kill -TERM "$gateway"; wait "$gateway" 2>/dev/null || true
  rm -f "/tmp/perf-$gateway.map"
  node bench/callgrind-by-function.mjs "$out.1" "$work/$label.map" "$requests" > "$work/$label.json"
}
echo "requests measured: $requests after $warmup warm-up; node $(node -v); $(valgrind --version); build $dist"
measure no-limit "$dist" --no-limit
measure headers-only "$work/headers-only" --no-limit
measure limited "$dist"
kill "$upstream"
node bench/callgrind-compare.mjs "$work/no-limit.json" "$work/headers-only.json" "$work/limited.json"
# Kept for other comparisons (node bench/callgrind-compare.mjs a.json b.json; node
# bench/callgrind-callers.mjs limited.out.1 limited.map 10000) when asked.
if [ -n "${GATEWAY_INSTRUCTIONS_KEEP:-}" ]; then
  mkdir -p "$GATEWAY_INSTRUCTIONS_KEEP"
  cp "$work"/*.json "$work"/*.map "$GATEWAY_INSTRUCTIONS_KEEP/"
  for label in no-limit headers-only limited; do cp "$work/$label.out.1" "$GATEWAY_INSTRUCTIONS_KEEP/"; done
fi
