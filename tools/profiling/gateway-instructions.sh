#!/usr/bin/env bash
# Instructions per request of `edgelimit serve`, limiting off and on, counted by valgrind's
# callgrind, and where the difference lies, function by function (our JavaScript included).
# Machine load does not change instruction counts, so this resolves differences that the
# wall-clock bench (bench/gateway.bench.ts) cannot on a shared machine. It does not see the
# kernel, nor cache misses unless asked.
#
#   bash tools/profiling/gateway-instructions.sh [requests] [dist-dir]
#       (default 10000 requests and dist/, built first; another commit's build for a
#       before/after pair; needs valgrind and curl; about 5 minutes per gateway)
#
# Knobs: GATEWAY_INSTRUCTIONS_WARMUP (warm-up requests, default 40,000),
# GATEWAY_INSTRUCTIONS_CACHE=1 (also simulate the first-level caches: about twice as slow),
# GATEWAY_INSTRUCTIONS_KEEP=<dir> (keep each gateway's by-function JSON, callgrind profile and
# V8 perf map, for callgrind-compare.mjs and callgrind-callers.mjs).
#
# Two gateways, one at a time (runs made at the same time do not reproduce): `serve --no-limit`
# (the proxy alone) and `serve` (memory store, examples/policies/cloudfront.yaml with its default
# window made a day, below). Each runs under callgrind with `--single-threaded` (V8's background
# work on the main thread, for repeatability) and `--perf-basic-prof` (V8's map of the code it
# compiles, which names the JavaScript that callgrind cannot: callgrind-by-function.mjs), takes
# the warm-up requests from 10,000 returning clients (X-Forwarded-For from loopback, as in
# bench/gateway.bench.ts), then the counters are zeroed and the measured requests sent, 8 at a
# time over keep-alive. The warm-up brings every client back four times, so the limited path is
# past its first-visit steps and runs in V8's optimized code. GC and V8's optimizing compiler are
# reported apart: under valgrind they run on the main thread far more often per request than at
# full speed.
# The window is made a day because under valgrind a client comes back every 100 s or so, past a
# 60 s window: every request would be its client's first of a new window.
set -euo pipefail
cd "$(dirname "$0")/../.."
requests=${1:-10000}
warmup=${GATEWAY_INSTRUCTIONS_WARMUP:-40000}
dist=${2:-}
if [ -z "$dist" ]; then npm run build >/dev/null; dist=dist; fi
tools=tools/profiling
cache_sim=()
[ -n "${GATEWAY_INSTRUCTIONS_CACHE:-}" ] && cache_sim=(--cache-sim=yes)
work=$(mktemp -d)
pids=()
trap 'for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; rm -rf "$work"' EXIT
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
pids+=($!)
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
  pids+=("$gateway")
  for _ in $(seq 120); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 1; done
  node "$work/load.mjs" "$port" "$warmup"
  callgrind_control -z "$gateway" >/dev/null 2>&1
  node "$work/load.mjs" "$port" "$requests"
  callgrind_control -d "$gateway" >/dev/null 2>&1
  cp "/tmp/perf-$gateway.map" "$work/$label.map"
  kill -TERM "$gateway"; wait "$gateway" 2>/dev/null || true
  rm -f "/tmp/perf-$gateway.map"
  node "$tools/callgrind-by-function.mjs" "$out.1" "$work/$label.map" "$requests" > "$work/$label.json"
}
echo "requests measured: $requests after $warmup warm-up; node $(node -v); $(valgrind --version); build $dist"
measure no-limit "$dist" --no-limit
measure limited "$dist"
node "$tools/callgrind-compare.mjs" "$work/no-limit.json" "$work/limited.json"
if [ -n "${GATEWAY_INSTRUCTIONS_KEEP:-}" ]; then
  mkdir -p "$GATEWAY_INSTRUCTIONS_KEEP"
  cp "$work"/*.json "$work"/*.map "$GATEWAY_INSTRUCTIONS_KEEP/"
  for label in no-limit limited; do cp "$work/$label.out.1" "$GATEWAY_INSTRUCTIONS_KEEP/"; done
fi
