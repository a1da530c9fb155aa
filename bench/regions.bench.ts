/**
 * `npx tsx bench/regions.bench.ts` (or `npm run bench -- regions`): issue 34, counting across
 * regions with real servers and a real distance, the longer run of test/regions/.
 *
 * DynamoDB: two regions of a global table, each a dynalite server in a process of its own,
 * `REGIONS_BENCH_DELAY_MS` (default 100) apart each way through a delay proxy, the replicator
 * double copying changed items every second (last writer wins), two limiters per region through
 * the library (`region`, `globalRegions`, `leaseRegion`, `leaseEndpoint`, `leaseRoundTripMs` set
 * to the true round trip), hybrid wrapped with `hybridCounting`. Redis: one redis-server, two
 * gateways beside it and two as far away, a budget that covers three far round trips.
 *
 * Traffic, per mode, on a rule of 100 per 10 s: a spread attack over every limiter of both
 * regions (`REGIONS_BENCH_ATTACK` requests/s in all, default 100), and legitimate subjects that
 * stay in one region (`REGIONS_BENCH_LEGIT` per region, default 20), each one request every
 * 400 ms to its region's limiters in turn (25 a window: under the limit). dynalite is far slower
 * than DynamoDB: at 300/s and 40 subjects a region (issue 34's run) on a loaded 2-core machine,
 * per-region counting (an `UpdateItem` and a `Query` per request) saturates it and every mode's
 * figures then measure the saturation. Reported per mode: the attacker's
 * admissions per window (by the window its counter counted it in), its decisions by reason, and
 * each region's legitimate decision times (p50, p99) and refusals.
 *
 * Knobs: REGIONS_BENCH_WINDOWS (windows per mode, default 3), REGIONS_BENCH_DELAY_MS (one way,
 * default 100), REGIONS_BENCH_ATTACK and REGIONS_BENCH_LEGIT (above), REGIONS_BENCH_MODES
 * (default "dynamodb-exact,dynamodb-hybrid,redis-exact,redis-hybrid"; "dynamodb-allowance" is
 * hybrid with the store's opt-in region holders and allowances). Exits 1 when a hybrid mode
 * admitted beyond the limit in a window.
 */

import { readFileSync } from "node:fs";
import { cpus } from "node:os";
import { definePolicy } from "../src/policy/load.js";
import { dynamodbFleets, type Fleets, redisFleets } from "../test/support/region-fleets.js";
import { percentile, runTraffic, type TrafficResult } from "../test/support/region-traffic.js";
import { startFarRedis, startRegions } from "../test/support/regions.js";

const WINDOWS = Number(process.env.REGIONS_BENCH_WINDOWS ?? 3);
const DELAY_MS = Number(process.env.REGIONS_BENCH_DELAY_MS ?? 100);
const ATTACK_PER_SECOND = Number(process.env.REGIONS_BENCH_ATTACK ?? 100);
const LEGIT_PER_REGION = Number(process.env.REGIONS_BENCH_LEGIT ?? 20);
const MODES = (
  process.env.REGIONS_BENCH_MODES ?? "dynamodb-exact,dynamodb-hybrid,redis-exact,redis-hybrid"
).split(",");
const LIMIT = 100;
const WINDOW_MS = 10_000;

function policyFor(counting: "exact" | "hybrid", budget: string) {
  return definePolicy({
    budget: budget as `${number}ms`,
    tiers: { anonymous: { global: { limit: LIMIT, window: "10s", counting } } },
  });
}

let runs = 0;

/** One mode's traffic; each run has an attacker and legitimate addresses of its own. */
async function run(fleets: Fleets): Promise<TrafficResult> {
  runs++;
  await fleets.warm();
  await new Promise((resolve) => setTimeout(resolve, WINDOW_MS - (Date.now() % WINDOW_MS) + 20));
  return runTraffic({
    fleets: fleets.fleets,
    durationMs: WINDOWS * WINDOW_MS - 100,
    windowMs: WINDOW_MS,
    attack: { ip: `203.0.113.${runs}`, perSecond: ATTACK_PER_SECOND },
    legit: { perRegion: LEGIT_PER_REGION, everyMs: 400, subnet: runs * 10 },
  });
}

const rows: string[] = [];
let overLimit = false;

function record(mode: string, result: TrafficResult): void {
  const windows = [...result.attack.admittedByWindow.values()];
  if (!mode.endsWith("exact") && windows.some((n) => n > LIMIT)) overLimit = true;
  const reasons = [...result.attack.reasons].map(([reason, n]) => `${reason} ${n}`).join(", ");
  for (const [region, figures] of result.legit) {
    const p = (share: number) => percentile(figures.latencies, share).toFixed(1);
    rows.push(
      `| ${mode} | ${region} | ${p(0.5)} | ${p(0.99)} | ${figures.refused} of ${figures.sent} | ${windows.join(", ")} | ${reasons} |`,
    );
  }
}

const want = (mode: string) => MODES.includes(mode);

if (want("dynamodb-exact") || want("dynamodb-hybrid") || want("dynamodb-allowance")) {
  const regions = await startRegions({
    names: ["us-east-1", "eu-west-1"],
    delayMs: DELAY_MS,
    replicationMs: 1000,
  });
  try {
    // `allowance`: hybrid with the store's region holders and allowances (opt-in).
    for (const variant of ["exact", "hybrid", "allowance"] as const) {
      const mode = `dynamodb-${variant}`;
      if (!want(mode)) continue;
      const fleets = dynamodbFleets(regions, {
        policy: policyFor(variant === "exact" ? "exact" : "hybrid", "50ms"),
        perRegion: 2,
        delayMs: DELAY_MS,
        allowances: variant === "allowance",
      });
      try {
        record(mode, await run(fleets));
      } finally {
        await fleets.close();
      }
    }
  } finally {
    await regions.close();
  }
}

if (want("redis-exact") || want("redis-hybrid")) {
  const redis = await startFarRedis(DELAY_MS);
  try {
    for (const counting of ["exact", "hybrid"] as const) {
      const mode = `redis-${counting}`;
      if (!want(mode)) continue;
      // The far gateways' budget covers their round trips: one for exact, three for hybrid.
      const budget = `${(counting === "exact" ? 2 : 6) * DELAY_MS + 50}ms`;
      const fleets = redisFleets(redis, { policy: policyFor(counting, budget), perRegion: 2 });
      try {
        record(mode, await run(fleets));
      } finally {
        await fleets.close();
      }
    }
  } finally {
    await redis.close();
  }
}

const load = readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
console.log(
  `\n${WINDOWS} windows of ${LIMIT} per 10 s per mode, ${DELAY_MS} ms each way between regions, attack ${ATTACK_PER_SECOND}/s, ${LEGIT_PER_REGION} legitimate subjects per region; machine: ${cpus().length} cpus, ${cpus()[0]?.model ?? "?"}, node ${process.version}; load average at the end ${load}\n`,
);
console.log(
  "| mode | region | legit p50 ms | legit p99 ms | legit refused | attacker admitted per window | attacker's decisions |",
);
console.log("|---|---|---:|---:|---:|---|---|");
for (const row of rows) console.log(row);
if (overLimit) {
  console.log("\nhybrid admitted beyond the limit in a window");
  process.exitCode = 1;
}
