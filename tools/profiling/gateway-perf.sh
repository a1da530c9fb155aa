#!/usr/bin/env bash
# Where the gateway's CPU time goes, limiting on and off, at full speed: `perf record` with a
# software clock (no hardware counters needed) over a wrk run of 10,000 returning clients (as
# bench/gateway.bench.ts), with V8's `--perf-basic-prof` naming the JavaScript. Unlike the
# instruction counts (gateway-instructions.sh) this sees time: cache misses, the kernel, and a
# machine that slows down. Each sample is 250 µs of CPU, so a figure is µs per request.
#
#   bash tools/profiling/gateway-perf.sh [dist-dir] [rounds]    (default dist/, built first;
#       2 rounds, about 1 minute each; needs perf, wrk, curl and a kernel that lets an
#       unprivileged process sample itself: perf_event_paranoid <= 2)
#
# Each round runs the no-limit and the limited gateway in turn (reversed every other round),
# each a new process: 4 s of wrk to warm up, then 7 s sampled. The report, by
# perf-categories.mjs: µs per request by category (our JavaScript, Node's, V8's builtins and
# runtime, GC, the kernel, ...) for every run, then the symbols whose time differs most between
# the two gateways (the rounds summed). On a shared machine the runs of one gateway can differ by
# 2x; compare the two gateways within a round.
set -euo pipefail
cd "$(dirname "$0")/../.."
dist=${1:-}
rounds=${2:-2}
if [ -z "$dist" ]; then npm run build >/dev/null; dist=dist; fi
dist=$(cd "$dist" && pwd)
work=$(mktemp -d)
pids=()
trap 'for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; rm -rf "$work"' EXIT
free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
upstream_port=$(free_port)
node -e "require('node:http').createServer((q, r) => { r.writeHead(200, { 'content-type': 'application/json' }); r.end('{\"ok\":true,\"items\":[1,2,3]}'); }).listen($upstream_port, '127.0.0.1')" &
pids+=($!)
# The example policy names a JWT and a challenge secret; the traffic here uses neither.
export EDGELIMIT_JWT_SECRET=bench-secret-not-used-by-anonymous-traffic
export EDGELIMIT_CHALLENGE_SECRET=bench-challenge-secret-not-used
cat > "$work/returning.lua" <<'LUA'
local n = 0
request = function()
  n = n + 1
  local i = n % 10000
  local ip = "10.9." .. math.floor(i / 250) .. "." .. (i % 250 + 1)
  return wrk.format("GET", "/api/search?q=shoes", { ["X-Forwarded-For"] = ip })
end
LUA
sample() {
  local label=$1; shift
  local port; port=$(free_port)
  node --perf-basic-prof "$dist/cli/main.js" serve --policy examples/policies/cloudfront.yaml \
    --upstream "http://127.0.0.1:$upstream_port" --port "$port" --host 127.0.0.1 --admin-port 0 \
    "$@" >/dev/null 2>&1 &
  local gateway=$!
  pids+=("$gateway")
  for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
  wrk -t1 -c32 -d4s -s "$work/returning.lua" "http://127.0.0.1:$port" >/dev/null
  perf record -q -e cpu-clock -F 4000 -p "$gateway" -o "$work/$label.data" -- sleep 7.5 >/dev/null 2>&1 &
  local recorder=$!
  sleep 0.2
  wrk -t1 -c32 -d7s -s "$work/returning.lua" "http://127.0.0.1:$port" |
    awk '/requests in/ { print $1 }' > "$work/$label.requests"
  wait "$recorder" || true
  perf report -i "$work/$label.data" --sort sym --stdio -F sample,sym 2>/dev/null |
    awk '$1 ~ /^[0-9]+$/' > "$work/$label.samples"
  kill "$gateway"; wait "$gateway" 2>/dev/null || true
  rm -f "/tmp/perf-$gateway.map"
}
runs=()
for round in $(seq "$rounds"); do
  if [ $((round % 2)) = 1 ]; then order="no-limit limited"; else order="limited no-limit"; fi
  for target in $order; do
    if [ "$target" = no-limit ]; then sample "$target-$round" --no-limit; else sample "$target-$round"; fi
    runs+=("$target-$round")
  done
done
echo "node $(node -v); $(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); build $dist; perf -e cpu-clock -F 4000 over 7 s of wrk -c32, returning clients"
node tools/profiling/perf-categories.mjs "$work" "$dist" "${runs[@]}"
