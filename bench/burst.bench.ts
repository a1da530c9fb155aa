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
 *   store-failed the store fails mid-burst (issue 25): a third of the limit is fired and
 *                answered, redis-server is stopped with SIGSTOP, the rest of the burst is fired
 *                at once, and the server is continued once it is answered (the next burst waits
 *                until both gateways count in Redis again). Run
 *                twice: with the example policy (`failMode: local`) and with a copy of it that
 *                says `failMode: open`. Reported: admitted against the limit in total and per
 *                gateway (the most one gateway admitted in a burst, and over all bursts), and
 *                decision p99: client and gateway as above, and the failed decisions' own from
 *                the gateways' decision logs (every failed decision is logged with its time)
 * Exits 1 when a contention or idle scenario is not exact (a correctness failure, issue 16), or
 * when a store-failed burst admitted more than the limit on one gateway with `failMode: local`
 * beyond what the store admitted before it stopped; 0 otherwise.
 * Knobs: BURST_BENCH_BURSTS (bursts per size, default 20), BURST_BENCH_SIZES (default
 * "300,1000"), BURST_BENCH_SCENARIOS (default "contention,idle,store-failed").
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism, cpus, tmpdir } from "node:os";
import { join } from "node:path";
import type { Pool } from "undici";
import { startRedis } from "../test/redis/redis-server.js";
import {
  type BurstGateway,
  burstAddress,
  burstPool,
  CLOUDFRONT_POLICY,
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
const SCENARIOS = (env.BURST_BENCH_SCENARIOS ?? "contention,idle,store-failed").split(",");
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

/** Two gateways on one store, each with a pool that holds half of the largest burst at once. */
async function twoGateways(
  store: string,
  policy?: string,
): Promise<{ gateways: BurstGateway[]; pools: Pool[] }> {
  const gateways = await Promise.all([
    startBurstGateway({ store, policy }),
    startBurstGateway({ store, policy }),
  ]);
  const pools = gateways.map((gateway) =>
    burstPool(gateway.base, Math.ceil(Math.max(...SIZES) / 2)),
  );
  return { gateways, pools };
}

async function scenario(name: string, run: number): Promise<Row[]> {
  const contention = name === "contention" ? await startCpuContention() : undefined;
  const redis = await startRedis();
  favourStore(redis.server.pid);
  const { gateways, pools } = await twoGateways(redis.server.url);
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

interface FailedRow {
  readonly mode: "local" | "open";
  readonly size: number;
  readonly admitted: number;
  readonly expected: number;
  readonly mostInBurst: number;
  readonly mostByOneGateway: number;
  readonly perGateway: readonly number[];
  readonly failedLocal: number;
  readonly clientP99: number;
  readonly gatewayP99: number;
  /** The decisions the store failed, from the gateways' decision logs (every one is logged). */
  readonly failedP99: number;
}

/** `durationMs` of every failed decision in these decision logs, sorted. */
function failedDecisionTimes(outputs: readonly string[]): number[] {
  const times: number[] = [];
  for (const output of outputs) {
    for (const line of output.split("\n")) {
      if (!line.includes('"msg":"decision"') || !line.includes('"reason":"store-failed-')) continue;
      times.push((JSON.parse(line) as { durationMs: number }).durationMs);
    }
  }
  return times.sort((a, b) => a - b);
}

/** The example policy as it is, or a copy of it that fails open. */
function policyFile(mode: "local" | "open"): { path: string; remove(): void } {
  if (mode === "local") return { path: CLOUDFRONT_POLICY, remove: () => {} };
  const text = readFileSync(CLOUDFRONT_POLICY, "utf8");
  if (!text.includes("failMode: local"))
    throw new Error("the example policy no longer says failMode: local");
  const dir = mkdtempSync(join(tmpdir(), "edgelimit-burst-"));
  const path = join(dir, "open.yaml");
  writeFileSync(path, text.replace("failMode: local", "failMode: open"));
  return { path, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Requests through `gateway` from fresh addresses until one is counted in Redis again. */
async function untilCounting(gateway: BurstGateway, pool: Pool, run: number): Promise<void> {
  const started = performance.now();
  for (let i = 0; ; i++) {
    const response = await pool.request({
      path: "/api/items",
      method: "GET",
      headers: { "x-forwarded-for": burstAddress(run, 50_000 + i) },
    });
    await response.body.dump();
    const health = (await (await fetch(`${gateway.adminBase}/healthz`)).json()) as {
      store: { calls?: { state: string } };
    };
    if (health.store.calls?.state === "ok") return;
    if (performance.now() - started > 15_000) throw new Error("the store did not come back");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

async function storeFailedMidBurst(mode: "local" | "open", run: number): Promise<FailedRow[]> {
  const policy = policyFile(mode);
  const redis = await startRedis();
  const pid = redis.server.pid as number;
  const { gateways, pools } = await twoGateways(redis.server.url, policy.path);
  const rows: FailedRow[] = [];
  try {
    let burst = 0;
    for (const size of SIZES) {
      const before = await Promise.all(gateways.map((gateway) => gateway.scrape()));
      const logged = gateways.map((gateway) => gateway.output().length);
      const perGateway = gateways.map(() => 0);
      const latencies: number[] = [];
      let mostInBurst = 0;
      let mostByOneGateway = 0;
      for (let i = 0; i < BURSTS; i++) {
        await withinOneWindow(60_000, 15_000);
        const ip = burstAddress(run, burst++);
        // A third of the limit with the store up, the rest with it stopped: the store fails
        // mid-burst, before the address has reached its limit (once it has, the block cache
        // answers the rest without the store). Each part is split over the gateways, every
        // request of it in flight at once.
        const fire = (count: number) =>
          Promise.all(
            pools.map((pool, g) =>
              fireBurst([pool], {
                size: Math.floor(count / pools.length) + (g < count % pools.length ? 1 : 0),
                path: PATH,
                ip,
              }),
            ),
          );
        const first = Math.floor(LIMIT / 3);
        const storeUp = await fire(first);
        process.kill(pid, "SIGSTOP");
        const storeStopped = await fire(size - first);
        process.kill(pid, "SIGCONT");
        const admitted = gateways.map(
          (_, g) => (storeUp[g]?.admitted ?? 0) + (storeStopped[g]?.admitted ?? 0),
        );
        for (const result of [...storeUp, ...storeStopped]) latencies.push(...result.latenciesMs);
        admitted.forEach((count, g) => {
          perGateway[g] = (perGateway[g] ?? 0) + count;
        });
        mostInBurst = Math.max(
          mostInBurst,
          admitted.reduce((total, count) => total + count, 0),
        );
        mostByOneGateway = Math.max(mostByOneGateway, ...admitted);
        await Promise.all(
          gateways.map((gateway, g) => untilCounting(gateway, pools[g] as Pool, run)),
        );
      }
      const after = await Promise.all(gateways.map((gateway) => gateway.scrape()));
      const sum = (texts: string[], name: string) =>
        texts.reduce((total, text) => total + metricValue(text, name), 0);
      latencies.sort((a, b) => a - b);
      rows.push({
        mode,
        size,
        admitted: perGateway.reduce((total, count) => total + count, 0),
        expected: BURSTS * LIMIT,
        mostInBurst,
        mostByOneGateway,
        perGateway,
        failedLocal:
          sum(after, "edgelimit_failed_local_total") - sum(before, "edgelimit_failed_local_total"),
        clientP99: quantile(latencies, 0.99),
        gatewayP99: histogramQuantile(before, after, 0.99),
        failedP99: quantile(
          failedDecisionTimes(gateways.map((gateway, g) => gateway.output().slice(logged[g]))),
          0.99,
        ),
      });
    }
  } finally {
    process.kill(pid, "SIGCONT");
    await Promise.all(pools.map((pool) => pool.destroy()));
    await Promise.all(gateways.map((gateway) => gateway.stop()));
    await redis.cleanup();
    policy.remove();
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
const failedRows: FailedRow[] = [];
for (const [index, name] of SCENARIOS.entries()) {
  process.stdout.write(`running ${name} (${BURSTS} bursts of ${SIZES.join(" and ")})...\n`);
  if (name === "store-failed") {
    for (const [mode, offset] of [
      ["local", 0],
      ["open", 1],
    ] as const) {
      failedRows.push(...(await storeFailedMidBurst(mode, 60 + 2 * index + offset)));
    }
  } else rows.push(...(await scenario(name, 40 + index)));
}

const ms = (value: number) => (Number.isFinite(value) ? value.toFixed(1) : "-");
const bound = (value: number) => (Number.isFinite(value) ? `≤ ${value}` : "> 250");
process.stdout.write(
  `\nMachine: ${cpus()[0]?.model ?? "?"}, ${availableParallelism()} cores, Node ${process.version}, redis-server ${redisVersion()}\n`,
);
process.stdout.write(
  `Two gateways, one redis-server, ${BURSTS} bursts per size of GET ${PATH} (limit ${LIMIT}/min), one fresh address per burst\n`,
);
const exact = rows.every((row) => row.admitted === row.expected && row.failedOpen === 0);
if (rows.length > 0) {
  process.stdout.write(
    "\n| scenario | burst | admitted / limit over all bursts | exact bursts | most admitted in a burst | failed open | other answers | client p50 / p99 ms | gateway decision p50 / p99 ms | s |\n",
  );
  process.stdout.write("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const row of rows) {
    process.stdout.write(
      `| ${row.scenario} | ${row.size} | ${row.admitted} / ${row.expected} | ${row.exactBursts} of ${BURSTS} | ${row.mostAdmitted} | ${row.failedOpen} | ${row.otherAnswers} | ${ms(row.clientP50)} / ${ms(row.clientP99)} | ${bound(row.gatewayP50)} / ${bound(row.gatewayP99)} | ${row.seconds.toFixed(1)} |\n`,
    );
  }
  process.stdout.write(
    `\n${exact ? "Exact: every burst admitted the limit, nothing failed open." : "NOT exact: some bursts admitted more than the limit (see failed open)."}\n`,
  );
}
if (failedRows.length > 0) {
  process.stdout.write(
    `\nThe store stopped (SIGSTOP) after the first ${Math.floor(LIMIT / 3)} requests of each burst, continued after the burst; limit ${LIMIT}/min per address, ${BURSTS} bursts per size\n\n`,
  );
  process.stdout.write(
    "| failMode | burst | admitted / limit over all bursts | most admitted in a burst | most admitted by one gateway in a burst | admitted per gateway over all bursts | counted locally | client p99 ms | gateway decision p99 ms | failed decisions p99 ms |\n",
  );
  process.stdout.write("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const row of failedRows) {
    process.stdout.write(
      `| ${row.mode} | ${row.size} | ${row.admitted} / ${row.expected} | ${row.mostInBurst} | ${row.mostByOneGateway} | ${row.perGateway.join(" + ")} | ${row.failedLocal} | ${ms(row.clientP99)} | ${bound(row.gatewayP99)} | ${ms(row.failedP99)} |\n`,
    );
  }
}
// With local counting, one gateway admits at most the limit locally, plus what the store had
// admitted for the burst's address before it stopped (at most the limit too).
const bounded = failedRows.every(
  (row) => row.mode !== "local" || row.mostByOneGateway <= 2 * LIMIT,
);
process.exitCode = exact && bounded ? 0 : 1;
