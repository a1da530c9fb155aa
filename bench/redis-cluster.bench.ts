/**
 * Redis Cluster benchmark: the figures of bench/redis.bench.ts through a Redis Cluster the bench
 * builds, with one master and with three (no replicas), against rate-limiter-flexible's
 * RateLimiterRedis on an ioredis `Cluster` client in the same run:
 *
 * 1. decisions per second with 256 concurrent callers, and CPU time per decision of the bench
 *    process and of every redis-server together; and how throughput grows from one master to
 *    three;
 * 2. redis-server CPU time per decision at 1, 16 and 64 callers, three masters.
 *
 * On a Cluster the store sends one script call per request (a call cannot span slots), with
 * ioredis auto-pipelining; the peer's client runs with its defaults.
 *
 *   npx tsx bench/redis-cluster.bench.ts   (BENCH_ROUNDS=3 rounds, BENCH_SECONDS=2 s per scenario)
 */
import { availableParallelism, cpus } from "node:os";
import { Cluster, Redis } from "ioredis";
import { RateLimiterRedis } from "rate-limiter-flexible";
import { createLimiter } from "../src/limiter.js";
import { definePolicy } from "../src/policy/load.js";
import { redisStoreFromUrl } from "../src/stores/redis.js";
import { startCluster, type TestCluster } from "../test/redis/redis-server.js";
import {
  addressFor,
  counterFor,
  formatNumber,
  median,
  medianRatio,
  type Operation,
  type Run,
  runCallers,
  table,
  throughputTable,
} from "./support/redis-load.js";

const CALLERS = 256;
const SECONDS = Number(process.env.BENCH_SECONDS ?? 2);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const DECISIONS = Number(process.env.BENCH_DECISIONS ?? 10_000);
const WARMUP_MS = 300;
const UNLIMITED = 1_000_000_000;

const policy = definePolicy({
  budget: "1s",
  tiers: { anonymous: { global: { limit: UNLIMITED, window: "60s" } } },
});

interface Setup {
  readonly cluster: TestCluster;
  readonly nodes: Redis[];
  readonly contenders: [string, Operation][];
  close(): Promise<void>;
}

async function setUp(masters: number): Promise<Setup> {
  const cluster = await startCluster({ masters });
  const nodes = cluster.nodes.map((node) => new Redis({ port: node.port, host: "127.0.0.1" }));
  const peerClient = new Cluster(
    cluster.nodes.map((node) => ({ host: "127.0.0.1", port: node.port })),
    { enableOfflineQueue: false },
  );
  await new Promise((resolve) => peerClient.once("ready", resolve));
  const peer = new RateLimiterRedis({ storeClient: peerClient, points: UNLIMITED, duration: 60 });
  const store = redisStoreFromUrl(cluster.url);
  await store.ready();
  const limiter = createLimiter({ store, policy });
  return {
    cluster,
    nodes,
    contenders: [
      ["rate-limiter-flexible RateLimiterRedis", (c, i) => peer.consume(addressFor(c, i))],
      [
        "edgelimit RedisStore.apply",
        (c, i) => store.apply([counterFor(addressFor(c, i), UNLIMITED)], 0),
      ],
      [
        "edgelimit limiter.check (1 rule)",
        (c, i) => limiter.check({ ip: addressFor(c, i), path: "/api/items" }),
      ],
    ],
    async close() {
      await store.close();
      peerClient.disconnect();
      for (const node of nodes) node.disconnect();
      await cluster.cleanup();
    },
  };
}

async function flushAll(nodes: readonly Redis[]): Promise<void> {
  await Promise.all(nodes.map((node) => node.flushall()));
}

const throughput = new Map<number, Map<string, Run[]>>();
const sweepRows: string[][] = [];
for (const masters of [1, 3]) {
  const setup = await setUp(masters);
  try {
    const runs = new Map<string, Run[]>(setup.contenders.map(([name]) => [name, []]));
    for (let round = 1; round <= ROUNDS; round++) {
      for (const [name, operation] of setup.contenders) {
        await flushAll(setup.nodes);
        runs.get(name)?.push(
          await runCallers(CALLERS, operation, setup.nodes, {
            seconds: SECONDS,
            warmupMs: WARMUP_MS,
          }),
        );
      }
      process.stdout.write(`${masters} master(s): round ${round}/${ROUNDS} done\n`);
    }
    throughput.set(masters, runs);
    if (masters === 3) {
      const [peer, , check] = setup.contenders;
      for (const callers of [1, 16, 64]) {
        const cost = { peer: [] as number[], ours: [] as number[] };
        for (let round = 0; round < 3; round++) {
          await flushAll(setup.nodes);
          cost.peer.push(
            (
              await runCallers(callers, (peer as [string, Operation])[1], setup.nodes, {
                decisions: DECISIONS,
              })
            ).serverMicros,
          );
          await flushAll(setup.nodes);
          cost.ours.push(
            (
              await runCallers(callers, (check as [string, Operation])[1], setup.nodes, {
                decisions: DECISIONS,
              })
            ).serverMicros,
          );
        }
        sweepRows.push([
          String(callers),
          formatNumber(median(cost.peer), 1),
          formatNumber(median(cost.ours), 1),
          `${medianRatio(cost.ours, cost.peer).toFixed(2)}x`,
        ]);
      }
    }
  } finally {
    await setup.close();
  }
}

for (const [masters, runs] of throughput) {
  process.stdout.write(
    `\n${masters} master(s), ${CALLERS} callers, decisions per second and CPU time per decision (µs, redis: all masters)\n${throughputTable(runs, false)}`,
  );
}
const one = throughput.get(1);
const three = throughput.get(3);
if (one !== undefined && three !== undefined) {
  process.stdout.write(
    `\nthroughput with 3 masters over 1 master (median rates)\n${table(
      ["scenario", "1 master/s", "3 masters/s", "growth"],
      [...three].map(([name, values]) => {
        const before = median((one.get(name) ?? []).map((run) => run.perSecond));
        const after = median(values.map((run) => run.perSecond));
        return [name, formatNumber(before), formatNumber(after), `${(after / before).toFixed(2)}x`];
      }),
    )}`,
  );
}
process.stdout.write(
  `\n3 masters, redis-server CPU time per decision (µs, all masters), ${formatNumber(DECISIONS)} decisions per run\n${table(
    ["callers", "rate-limiter-flexible", "edgelimit limiter.check", "ratio"],
    sweepRows,
  )}`,
);
process.stdout.write(
  `\nmachine: ${availableParallelism()} cores (${cpus()[0]?.model ?? "unknown CPU"}) for the bench and every redis-server, node ${process.version}, ${ROUNDS} rounds of ${SECONDS} s per scenario\n`,
);
