#!/usr/bin/env bash
# Instructions per request of `edgelimit serve`, limiting on and off, counted by valgrind's
# callgrind: machine load does not change instruction counts, so this resolves differences that
# wall-clock benchmarks on a shared machine cannot (it does not see cache misses or the kernel).
#
#   bash bench/gateway-instructions.sh [requests] [dist-dir]
#       (default 10000 requests and dist/; needs valgrind and a build: npm run build, or another
#       commit's build for a before/after pair)
#
# Each gateway runs under callgrind with `--single-threaded` (V8's background work on the main
# thread, for repeatability), takes 12,000 warm-up requests from 10,000 returning clients
# (X-Forwarded-For from loopback, as in bench/gateway.bench.ts), then the counters are zeroed and
# the measured requests sent, 8 at a time over keep-alive. GC is reported apart: under valgrind,
# V8's time-driven GC tasks run far more often per request than at full speed.
set -euo pipefail
cd "$(dirname "$0")/.."
requests=${1:-10000}
dist=${2:-dist}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
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
measure() {
  local label=$1; shift
  local port; port=$(free_port)
  local out="$work/$label.out"
  EDGELIMIT_JWT_SECRET=bench-secret-not-used-by-anonymous-traffic \
    valgrind --tool=callgrind --smc-check=all --callgrind-out-file="$out" \
    node --single-threaded "$dist/cli/main.js" serve --policy examples/policies/cloudfront.yaml \
    --upstream "http://127.0.0.1:$upstream_port" --port "$port" --host 127.0.0.1 --admin-port 0 "$@" \
    >/dev/null 2>&1 &
  local gateway=$!
  for _ in $(seq 120); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 1; done
  node "$work/load.mjs" "$port" 12000
  callgrind_control -z "$gateway" >/dev/null
  node "$work/load.mjs" "$port" "$requests"
  callgrind_control -d "$gateway" >/dev/null
  kill -TERM "$gateway"; wait "$gateway" 2>/dev/null || true
  callgrind_annotate --inclusive=no --threshold=100 "$out.1" | python3 -c '
import re, sys
label, requests = sys.argv[1], int(sys.argv[2])
total = gc = 0
for line in sys.stdin:
    m = re.match(r"^\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(.*)$", line)
    if m is None:
        continue
    count, name = int(m.group(1).replace(",", "")), m.group(2)
    if "PROGRAM TOTALS" in name:
        total = count
        continue
    if re.search(r"Scaveng|Marking|Sweeper|MarkCompact|Evacuat|RememberedSet|SlotSet|ConcurrentMark|Compactor|PointersUpdating|MinorMC|BodyDescriptor|PagedSpace|FreeList", name):
        gc += count
print(f"{label:10} {total // requests:>8} instructions/request  (GC {gc // requests}, rest {(total - gc) // requests})")
' "$label" "$requests"
}
echo "requests measured: $requests; node $(node -v); $(valgrind --version)"
measure no-limit --no-limit
measure limited
kill "$upstream"
