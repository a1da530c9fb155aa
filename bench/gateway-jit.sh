#!/usr/bin/env bash
# How long the gateway takes to reach its steady state, and where its CPU goes meanwhile: V8's
# optimizing compiler (`--trace-opt --trace-deopt`) and the process's user and system time, window
# by window, limiting off and on.
#
#   bash bench/gateway-jit.sh [dist-dir] [windows] [seconds]
#       (default dist/, built first; 8 windows of 3 s; needs wrk)
#
# Each gateway is one process for all its windows (`serve --no-limit`, then `serve` with
# examples/policies/cloudfront.yaml and the memory store), loaded by wrk with the returning
# clients of bench/gateway.bench.ts. Per window: requests, CPU per request split into user and
# system time (/proc/<pid>/stat), the optimizations V8 completed and the deoptimizations it
# made, and the compile time it reported, per request. Compile time is CPU time of the process
# (V8 compiles on a background thread), so a window where V8 is still compiling costs more per
# request than the steady state does. The tracing itself costs a little: compare the windows of
# one run, not these figures with bench/gateway.bench.ts.
set -euo pipefail
cd "$(dirname "$0")/.."
dist=${1:-}
windows=${2:-8}
seconds=${3:-3}
if [ -z "$dist" ]; then npm run build >/dev/null; dist=dist; fi
work=$(mktemp -d)
# shellcheck source=bench/gateway-common.sh
source bench/gateway-common.sh
start_upstream
ticks=$(getconf CLK_TCK)
run() {
  local label=$1; shift
  local port; port=$(free_port)
  local log=$work/$label.log
  node --trace-opt --trace-deopt "$dist/cli/main.js" serve --policy examples/policies/cloudfront.yaml \
    --upstream "http://127.0.0.1:$upstream_port" --port "$port" --host 127.0.0.1 --admin-port 0 \
    "$@" > "$log" 2>&1 &
  local gateway=$!
  pids+=("$gateway")
  for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
  for window in $(seq "$windows"); do
    local from; from=$(wc -l < "$log")
    local before; before=$(awk '{ print $14, $15 }' "/proc/$gateway/stat")
    local requests
    requests=$(wrk -t1 -c32 -d"${seconds}s" -s "$work/returning.lua" "http://127.0.0.1:$port" |
      awk '/requests in/ { print $1 }')
    local after; after=$(awk '{ print $14, $15 }' "/proc/$gateway/stat")
    sleep 0.2
    awk -v from="$from" -v label="$label" -v window="$window" -v requests="$requests" \
      -v before="$before" -v after="$after" -v ticks="$ticks" '
      NR > from && /completed compiling/ {
        compiles++
        match($0, /took [0-9.]+, [0-9.]+, [0-9.]+/)
        split(substr($0, RSTART + 5, RLENGTH - 5), phases, ", ")
        ms += phases[1] + phases[2] + phases[3]
      }
      NR > from && /bailout \(kind/ { deopts++ }
      END {
        split(before, b, " "); split(after, a, " ")
        scale = 1e6 / ticks / requests
        printf "%-9s %3d %8d %8.1f %8.1f %8.1f %9d %7d %9.2f\n", label, window, requests,
          (a[1] - b[1]) * scale, (a[2] - b[2]) * scale, (a[1] + a[2] - b[1] - b[2]) * scale,
          compiles, deopts, ms * 1000 / requests
      }' "$log"
  done
  kill "$gateway"; wait "$gateway" 2>/dev/null || true
}
echo "node $(node -v); $(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); build $dist; wrk -t1 -c32, ${seconds} s windows, returning clients"
echo "gateway   window requests  user µs  sys µs  total µs  compiles  deopts  compile µs   (per request)"
run no-limit --no-limit
run limited
