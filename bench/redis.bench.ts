/**
 * Redis store benchmark: decisions per second with 256 concurrent callers against one local
 * redis-server, ours (through the store and through the limiter) against rate-limiter-flexible's
 * RateLimiterRedis, all in the same run; then the seed's attack (one IP at 800 requests/s
 * against 60/min for 60 s of simulated time) and the Redis round trips per blocked request.
 *
 *   npx tsx bench/redis.bench.ts            (BENCH_SECONDS=5 by default per scenario)
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { RateLimiterRedis } from "rate-limiter-flexible";
import { createLimiter } from "../src/core/limiter.js";
import type { CounterSpec } from "../src/core/types.js";
import { definePolicy } from "../src/policy/load.js";
import { RedisStore, redisClientOptions } from "../src/stores/redis.js";

const CALLERS = 256;
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const WARMUP_MS = 1000;
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
    backend: undefined,
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
  const results: { name: string; perSecond: number }[] = [];
  const record = (name: string, perSecond: number): void => {
    results.push({ name, perSecond });
    process.stdout.write(
      `${name.padEnd(58)} ${Math.round(perSecond).toLocaleString("en-US").padStart(10)} /s\n`,
    );
  };

  // Peer: rate-limiter-flexible, as its docs set it up (plain ioredis client).
  {
    const client = new Redis({ port, host: "127.0.0.1", enableOfflineQueue: false });
    await new Promise((resolve) => client.once("ready", resolve));
    const limiter = new RateLimiterRedis({
      storeClient: client,
      points: 1_000_000_000,
      duration: 60,
    });
    record(
      "rate-limiter-flexible RateLimiterRedis",
      await throughput((c, i) => limiter.consume(ipFor(c, i))),
    );
    client.disconnect();
    await admin.flushall();
  }
  // Peer with the same auto-pipelining we use, so the comparison is not just the client option.
  {
    const client = new Redis({
      port,
      host: "127.0.0.1",
      enableOfflineQueue: false,
      enableAutoPipelining: true,
    });
    await new Promise((resolve) => client.once("ready", resolve));
    const limiter = new RateLimiterRedis({
      storeClient: client,
      points: 1_000_000_000,
      duration: 60,
    });
    record(
      "rate-limiter-flexible RateLimiterRedis + autoPipelining",
      await throughput((c, i) => limiter.consume(ipFor(c, i))),
    );
    client.disconnect();
    await admin.flushall();
  }
  // Ours, batching off (one script call per request), with ioredis auto-pipelining.
  {
    const client = new Redis({
      port,
      host: "127.0.0.1",
      ...redisClientOptions(),
      enableAutoPipelining: true,
    });
    const store = new RedisStore({ client, maxBatch: 1 });
    await store.ready();
    record(
      "edgelimit RedisStore.apply (maxBatch 1, autoPipelining)",
      await throughput((c, i) => store.apply([counterFor(ipFor(c, i))], 0)),
    );
    client.disconnect();
    await admin.flushall();
  }
  // Ours, as redisStoreFromUrl builds it.
  let storeRate = 0;
  {
    const store = new RedisStore({ client: `redis://127.0.0.1:${port}` });
    await store.ready();
    storeRate = await throughput((c, i) => store.apply([counterFor(ipFor(c, i))], 0));
    record("edgelimit RedisStore.apply", storeRate);
    await admin.flushall();
    const limiter = createLimiter({
      store,
      policy: definePolicy({
        budget: "1s",
        tiers: { anonymous: { global: { limit: 1_000_000_000, window: "60s" } } },
      }),
    });
    record(
      "edgelimit limiter.check (RedisStore, 1 rule)",
      await throughput((c, i) => limiter.check({ ip: ipFor(c, i), path: "/api/items" })),
    );
    await store.close();
    await admin.flushall();
  }

  const peer = results[0]?.perSecond ?? 1;
  process.stdout.write("\nratio to RateLimiterRedis (plain client):\n");
  for (const { name, perSecond } of results) {
    process.stdout.write(`  ${name.padEnd(56)} ${(perSecond / peer).toFixed(2)}x\n`);
  }

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
    `\nmachine: ${cpus().length} cores, ${cpus()[0]?.model ?? "unknown CPU"}, node ${process.version}, ${CALLERS} callers, ${SECONDS} s per scenario\n`,
  );
} finally {
  stopServer();
}
