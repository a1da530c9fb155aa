#!/usr/bin/env bash
# What one memory-store decision costs a returning client, counted by valgrind's cachegrind
# with its simulated caches: instructions and first-level data-cache misses per `applySync` of
# two counters (a rule per path and a global one, as the example policy's anonymous tier), over
# 10,000 clients visited in a scattered order, after 100,000 warm-up calls. Each build is run
# twice, with 0 and with 200,000 measured calls, and the difference is divided by 200,000, so
# start-up and warm-up cancel out. Deterministic, unlike timings on a shared machine; it sees
# cache misses, which instruction counts alone do not.
#
#   bash bench/memory-store-cachegrind.sh [dist-dir ...]   (default dist/, built first; needs valgrind)
#
# To compare with an older commit: git archive REV | tar -x -C /tmp/old && (cd /tmp/old &&
# ln -s "$PWD/node_modules" . && npx tsc -p tsconfig.build.json) then pass /tmp/old/dist too.
set -euo pipefail
cd "$(dirname "$0")/.."
builds=("$@")
if [ ${#builds[@]} -eq 0 ]; then npm run build >/dev/null; builds=(dist); fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/store.mjs" <<'JS'
import { pathToFileURL } from "node:url";
const [build, callsText] = process.argv.slice(2);
const { memoryStore } = await import(pathToFileURL(`${build}/stores/memory.js`).href);
const store = memoryStore();
const clients = 10_000;
const counter = (i, rule) => ({
  key: `ip:10.9.${i >> 8}.${i & 255}|anonymous.${rule}`,
  subject: `ip:10.9.${i >> 8}.${i & 255}`,
  algorithm: "fixed-window",
  limit: 1e9,
  window: { ms: 60_000 },
  cost: 1,
  mode: "enforce",
  ruleId: `anonymous.${rule}`,
  namespace: "anonymous",
  backend: undefined,
  // As the limiter's counters: each carries its entry (see CounterSpec.storeHandle).
  storeHandle: null,
});
const global = Array.from({ length: clients }, (_, i) => counter(i, "global"));
const path = Array.from({ length: clients }, (_, i) => counter(i, "path"));
let now = Date.UTC(2026, 11, 1, 3, 0, 0);
let sum = 0;
for (let i = 0; i < 100_000 + Number(callsText); i++) {
  const k = (i * 7919) % clients;
  sum += store.applySync([global[k], path[k]], now)[0].remaining;
  if ((i & 15) === 0) now++;
}
if (sum <= 0) process.exit(1);
JS
count() {
  valgrind --tool=cachegrind --cache-sim=yes --cachegrind-out-file=/dev/null \
    node --single-threaded "$work/store.mjs" "$1" "$2" 2>&1 |
    awk '/I *refs:/ { gsub(",", "", $4); i = $4 } /D1 *misses:/ { gsub(",", "", $4); gsub(",", "", $6); gsub(",", "", $9); m = $4; r = $6; w = $9 } END { print i, m, r, w }'
}
echo "$(node -v); $(valgrind --version); per applySync of two counters, 10,000 returning clients"
printf '%-40s %14s %12s %10s %10s\n' build instructions "D1 misses" reads writes
for build in "${builds[@]}"; do
  build=$(cd "$build" && pwd)
  read -r i0 m0 r0 w0 < <(count "$build" 0)
  read -r i1 m1 r1 w1 < <(count "$build" 200000)
  awk -v b="$build" -v i="$((i1 - i0))" -v m="$((m1 - m0))" -v r="$((r1 - r0))" -v w="$((w1 - w0))" \
    'BEGIN { printf "%-40s %14.0f %12.1f %10.1f %10.1f\n", b, i / 200000, m / 200000, r / 200000, w / 200000 }'
done
