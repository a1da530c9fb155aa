/**
 * Redis store benchmark: decisions per second with 256 concurrent callers against one local
 * redis-server, ours (through the store and through the limiter) against rate-limiter-flexible's
 * RateLimiterRedis, all in the same run; then the seed's attack (one IP at 800 requests/s
 * against 60/min for 60 s of simulated time) and the Redis round trips per blocked request.
 *
 *   npx tsx bench/redis.bench.ts   (BENCH_ROUNDS=5 rounds of BENCH_SECONDS=3 s per scenario)
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { RateLimiterRedis } from "rate-limiter-flexible";
import type { CounterSpec } from "../src/core/types.js";
import { createLimiter } from "../src/limiter.js";
import { definePolicy } from "../src/policy/load.js";
import { RedisStore, redisClientOptions } from "../src/stores/redis.js";

const CALLERS = 256;
const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const WARMUP_MS = 500;
const DISTINCT_KEYS = 10_000;

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() =>
        resolve(typeof address === "object" && address !== null ? address.port : 0),
      );
    });
  });
}

async function waitForRedis(port: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    const probe = new Redis({
      port,
      host: "127.0.0.1",
      lazyConnect: true,
      retryStrategy: () => null,
    });
    probe.on("error", () => {});
    try {
      await probe.connect();
      await probe.ping();
      probe.disconnect();
      return;
    } catch {
      probe.disconnect();
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  throw new Error("redis-server did not start");
}

/** Runs `operation` from CALLERS concurrent loops; returns completed operations per second. */
async function throughput(
  operation: (caller: number, i: number) => Promise<unknown>,
): Promise<number> {
  let stopAt = performance.now() + WARMUP_MS;
  let counting = false;
  let completed = 0;
  const loop = async (caller: number): Promise<void> => {
    for (let i = 0; ; i++) {
      if (performance.now() >= stopAt) {
        if (counting) return;
      }
      await operation(caller, i);
      if (counting) completed++;
    }
  };
  const loops = Array.from({ length: CALLERS }, (_, caller) => loop(caller));
  await new Promise((resolve) => setTimeout(resolve, WARMUP_MS));
  const started = performance.now();
  counting = true;
  stopAt = started + SECONDS * 1000;
  await Promise.all(loops);
  return completed / ((performance.now() - started) / 1000);
}

function ipFor(caller: number, i: number): string {
  const n = (caller * 7919 + i * 104_729) % DISTINCT_KEYS;
  return `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`;
}

function counterFor(ip: string): CounterSpec {
  const subject = `ip:${ip}`;
  return {
    key: `${subject}|default|global`,
    subject,
    algorithm: "fixed-window",
    limit: 1_000_000_000,
    window: { ms: 60_000 },
    cost: 1,
    mode: "enforce",
    ruleId: "anonymous.global",
    namespace: "default",
  };
}

const dir = mkdtempSync(join(tmpdir(), "edgelimit-bench-redis-"));
const port = await freePort();
const server = spawn(
  "redis-server",
  ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir],
  { stdio: "ignore" },
);
const stopServer = (): void => {
  if (server.exitCode === null) server.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
};
process.on("exit", stopServer);

try {
  await waitForRedis(port);
  const admin = new Redis({ port, host: "127.0.0.1" });
  const peerClient = new Redis({ port, host: "127.0.0.1", enableOfflineQueue: false });
  const peerPipelinedClient = new Redis({
    port,
    host: "127.0.0.1",
    enableOfflineQueue: false,
    enableAutoPipelining: true,
  });
  const unbatchedClient = new Redis({
    port,
    host: "127.0.0.1",
    ...redisClientOptions(),
    enableAutoPipelining: true,
  });
  const peer = new RateLimiterRedis({ storeClient: peerClient, points: 1e9, duration: 60 });
  const peerPipelined = new RateLimiterRedis({
    storeClient: peerPipelinedClient,
    points: 1e9,
    duration: 60,
  });
  const unbatched = new RedisStore({ client: unbatchedClient, maxBatch: 1 });
  const store = new RedisStore({ client: `redis://127.0.0.1:${port}` });
  await Promise.all([unbatched.ready(), store.ready()]);
  const limiter = createLimiter({
    store,
    policy: definePolicy({
      budget: "1s",
      tiers: { anonymous: { global: { limit: 1_000_000_000, window: "60s" } } },
    }),
  });
  const scenarios: [string, (caller: number, i: number) => Promise<unknown>][] = [
    ["rate-limiter-flexible RateLimiterRedis", (c, i) => peer.consume(ipFor(c, i))],
    [
      "rate-limiter-flexible RateLimiterRedis + autoPipelining",
      (c, i) => peerPipelined.consume(ipFor(c, i)),
    ],
    [
      "edgelimit RedisStore.apply (maxBatch 1, autoPipelining)",
      (c, i) => unbatched.apply([counterFor(ipFor(c, i))], 0),
    ],
    ["edgelimit RedisStore.apply", (c, i) => store.apply([counterFor(ipFor(c, i))], 0)],
    [
      "edgelimit limiter.check (RedisStore, 1 rule)",
      (c, i) => limiter.check({ ip: ipFor(c, i), path: "/api/items" }),
    ],
  ];
  // Rounds interleave the scenarios so that load from other jobs on the machine hits them
  // alike; the median of the rounds is reported.
  const rates = new Map<string, number[]>(scenarios.map(([name]) => [name, []]));
  for (let round = 1; round <= ROUNDS; round++) {
    for (const [name, operation] of scenarios) {
      const perSecond = await throughput(operation);
      rates.get(name)?.push(perSecond);
      await admin.flushall();
      await Promise.all([unbatched.ready(), store.ready()]);
    }
    process.stdout.write(`round ${round}/${ROUNDS} done\n`);
  }
  const median = (values: number[]): number =>
    [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)] ?? 0;
  const peerRates = rates.get(scenarios[0]?.[0] as string) ?? [];
  process.stdout.write(
    `\n${"scenario".padEnd(58)} ${"median/s".padStart(10)}  ratio (median of rounds)  per round\n`,
  );
  for (const [name, values] of rates) {
    // Ratios are taken within a round, where both sides saw the same machine load.
    const ratios = values.map((value, round) => value / (peerRates[round] ?? 1));
    process.stdout.write(
      `${name.padEnd(58)} ${Math.round(median(values)).toLocaleString("en-US").padStart(10)}  ${median(ratios).toFixed(2)}x${" ".repeat(20)}${ratios.map((ratio) => `${ratio.toFixed(2)}x`).join(" ")}\n`,
    );
  }
  peerClient.disconnect();
  peerPipelinedClient.disconnect();
  unbatchedClient.disconnect();
  await store.close();
  await admin.flushall();

  // The seed's attack, simulated time: one IP at 800/s against 60/min for 60 s.
  {
    const store = new RedisStore({ client: `redis://127.0.0.1:${port}`, clock: "caller" });
    await store.ready();
    const windowStart = Math.ceil((Date.now() + 86_400_000) / 60_000) * 60_000;
    let now = windowStart;
    const limiter = createLimiter({
      store,
      clock: () => now,
      policy: definePolicy({
        budget: "1s",
        tiers: {
          anonymous: {
            global: { limit: 60, window: "60s", action: "challenge", challengeBand: 2 },
          },
        },
      }),
    });
    let blocked = 0;
    const requests = 800 * 60;
    for (let i = 0; i < requests; i++) {
      now = windowStart + Math.floor((i * 1000) / 800);
      const verdict = await limiter.check({ ip: "203.0.113.66", path: "/api/search" });
      if (verdict.action === "block") blocked++;
    }
    process.stdout.write(
      `\nseed attack (800/s vs 60/min, 60 s simulated): ${requests} requests, ${blocked} blocked, ` +
        `${store.roundTrips} Redis round trips, ${(store.roundTrips / blocked).toFixed(4)} round trips per blocked request\n`,
    );
    await store.close();
  }
  admin.disconnect();
  process.stdout.write(
    `\nmachine: ${cpus().length} cores, ${cpus()[0]?.model ?? "unknown CPU"}, node ${process.version}, ${CALLERS} callers, ${ROUNDS} rounds of ${SECONDS} s per scenario\n`,
  );
} finally {
  stopServer();
}
