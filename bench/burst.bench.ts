/**
 * `npx tsx bench/burst.bench.ts` (or `npm run bench -- burst`), after `npm run build`: issue 16,
 * bursts from one client against two gateways that share one redis-server.
 *
 * Two `edgelimit serve` processes from the build (examples/policies/cloudfront.yaml, which
 * trusts X-Forwarded-For from loopback; `--demo` origin; `--store redis://...`), one local
 * redis-server, and bursts of concurrent `GET /api/search?q=1` (30 per minute for an anonymous
 * client), each from an address of its own and split over both gateways, over keep-alive pools
 * with a connection per request in flight. Scenarios, each with a fresh redis-server and fresh
 * gateways (cold, as after a deploy):
 *   contention   one busy-loop process per core beside everything (test/support/cpu-contention.ts)
 *   idle         the same without the busy processes, for comparison
 * Reported per scenario and burst size: admitted against the limit over all bursts (must be
 * exact), the bursts that were exact, the largest burst's admissions, the gateways'
 * `edgelimit_failed_open_total` over those bursts, and two decision times:
 *   client p50/p99   from sending a request to its response headers, as the client saw it
 *                    (queueing in both processes included: an upper bound on the decision)
 *   gateway p50/p99  the gateways' `edgelimit_decision_duration_seconds` histogram over those
 *                    bursts (both gateways summed), as the upper bound of the bucket the
 *                    quantile falls in; the limiter times decisions with the epoch clock, in
 *                    whole milliseconds. Past the limit most of a burst is answered by the
 *                    block cache without Redis, so in bursts of 1,000 the p50 is those answers
 * Exits 1 when a scenario is not exact (a correctness failure, issue 16), 0 otherwise.
 * Knobs: BURST_BENCH_BURSTS (bursts per size, default 20), BURST_BENCH_SIZES (default
 * "300,1000"), BURST_BENCH_SCENARIOS (default "contention,idle").
 */
import { execFileSync } from "node:child_process";
import { availableParallelism, cpus } from "node:os";
import { startRedis } from "../test/redis/redis-server.js";
import {
  burstAddress,
  burstPool,
  fireBurst,
  histogramBuckets,
  metricValue,
  quantile,
  startBurstGateway,
} from "../test/support/burst.js";
import { favourStore, startCpuContention } from "../test/support/cpu-contention.js";
import { withinOneWindow } from "../test/support/windows.js";

const env = process.env;
const BURSTS = Number(env.BURST_BENCH_BURSTS ?? 20);
const SIZES = (env.BURST_BENCH_SIZES ?? "300,1000").split(",").map(Number);
const SCENARIOS = (env.BURST_BENCH_SCENARIOS ?? "contention,idle").split(",");
const PATH = "/api/search?q=1";
const LIMIT = 30;
const HISTOGRAM = "edgelimit_decision_duration_seconds";

interface Row {
  readonly scenario: string;
  readonly size: number;
  readonly admitted: number;
  readonly expected: number;
  readonly exactBursts: number;
  readonly mostAdmitted: number;
  readonly failedOpen: number;
  readonly otherAnswers: number;
  readonly clientP50: number;
  readonly clientP99: number;
  readonly gatewayP50: number;
  readonly gatewayP99: number;
  readonly seconds: number;
}

/** Upper bound (ms) of the bucket holding quantile q of the observations between two scrapes. */
function histogramQuantile(before: string[], after: string[], q: number): number {
  const delta = new Map<number, number>();
  for (const [index, text] of after.entries()) {
    const earlier = new Map(histogramBuckets(before[index] as string, HISTOGRAM));
    for (const [bound, count] of histogramBuckets(text, HISTOGRAM)) {
      delta.set(bound, (delta.get(bound) ?? 0) + count - (earlier.get(bound) ?? 0));
    }
  }
  const buckets = [...delta].sort((a, b) => a[0] - b[0]);
  const total = buckets.at(-1)?.[1] ?? 0;
  const found = buckets.find(([, cumulative]) => cumulative >= q * total);
  return found === undefined ? Number.NaN : found[0] * 1000;
}

async function scenario(name: string, run: number): Promise<Row[]> {
  const contention = name === "contention" ? await startCpuContention() : undefined;
  const redis = await startRedis();
  favourStore(redis.server.pid);
  const gateways = await Promise.all([
    startBurstGateway({ store: redis.server.url }),
    startBurstGateway({ store: redis.server.url }),
  ]);
  const pools = gateways.map((gateway) =>
    burstPool(gateway.base, Math.ceil(Math.max(...SIZES) / 2)),
  );
  const rows: Row[] = [];
  try {
    let burst = 0;
    for (const size of SIZES) {
      const before = await Promise.all(gateways.map((gateway) => gateway.scrape()));
      const started = performance.now();
      const admissions: number[] = [];
      const latencies: number[] = [];
      let otherAnswers = 0;
      for (let i = 0; i < BURSTS; i++) {
        await withinOneWindow(60_000, 5_000);
        const result = await fireBurst(pools, {
          size,
          path: PATH,
          ip: burstAddress(run, burst++),
        });
        admissions.push(result.admitted);
        for (const latency of result.latenciesMs) latencies.push(latency);
        otherAnswers += size - result.admitted - (result.statuses[429] ?? 0);
      }
      const seconds = (performance.now() - started) / 1000;
      const after = await Promise.all(gateways.map((gateway) => gateway.scrape()));
      const failedOpen = (texts: string[]) =>
        texts.reduce((sum, text) => sum + metricValue(text, "edgelimit_failed_open_total"), 0);
      latencies.sort((a, b) => a - b);
      rows.push({
        scenario: name,
        size,
        admitted: admissions.reduce((sum, count) => sum + count, 0),
        expected: BURSTS * LIMIT,
        exactBursts: admissions.filter((count) => count === LIMIT).length,
        mostAdmitted: Math.max(...admissions),
        failedOpen: failedOpen(after) - failedOpen(before),
        otherAnswers,
        clientP50: quantile(latencies, 0.5),
        clientP99: quantile(latencies, 0.99),
        gatewayP50: histogramQuantile(before, after, 0.5),
        gatewayP99: histogramQuantile(before, after, 0.99),
        seconds,
      });
    }
  } finally {
    await Promise.all(pools.map((pool) => pool.destroy()));
    await Promise.all(gateways.map((gateway) => gateway.stop()));
    await redis.cleanup();
    await contention?.stop();
  }
  return rows;
}

function redisVersion(): string {
  try {
    return execFileSync("redis-server", ["--version"], { encoding: "utf8" }).split(" ")[2] ?? "?";
  } catch {
    return "?";
  }
}

const rows: Row[] = [];
for (const [index, name] of SCENARIOS.entries()) {
  process.stdout.write(`running ${name} (${BURSTS} bursts of ${SIZES.join(" and ")})...\n`);
  rows.push(...(await scenario(name, 40 + index)));
}

const ms = (value: number) => (Number.isFinite(value) ? value.toFixed(1) : "-");
const bound = (value: number) => (Number.isFinite(value) ? `≤ ${value}` : "> 250");
process.stdout.write(
  `\nMachine: ${cpus()[0]?.model ?? "?"}, ${availableParallelism()} cores, Node ${process.version}, redis-server ${redisVersion()}\n`,
);
process.stdout.write(
  `Two gateways, one redis-server, ${BURSTS} bursts per size of GET ${PATH} (limit ${LIMIT}/min), one fresh address per burst\n\n`,
);
process.stdout.write(
  "| scenario | burst | admitted / limit over all bursts | exact bursts | most admitted in a burst | failed open | other answers | client p50 / p99 ms | gateway decision p50 / p99 ms | s |\n",
);
process.stdout.write("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
for (const row of rows) {
  process.stdout.write(
    `| ${row.scenario} | ${row.size} | ${row.admitted} / ${row.expected} | ${row.exactBursts} of ${BURSTS} | ${row.mostAdmitted} | ${row.failedOpen} | ${row.otherAnswers} | ${ms(row.clientP50)} / ${ms(row.clientP99)} | ${bound(row.gatewayP50)} / ${bound(row.gatewayP99)} | ${row.seconds.toFixed(1)} |\n`,
  );
}
const exact = rows.every((row) => row.admitted === row.expected && row.failedOpen === 0);
process.stdout.write(
  `\n${exact ? "Exact: every burst admitted the limit, nothing failed open." : "NOT exact: some bursts admitted more than the limit (see failed open)."}\n`,
);
process.exitCode = exact ? 0 : 1;
