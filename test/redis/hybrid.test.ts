import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hybridCounting } from "../../src/core/hybrid-counting.js";
import { createLimiter } from "../../src/limiter.js";
import { definePolicy } from "../../src/policy/load.js";
import { type RedisStore, redisStoreFromUrl } from "../../src/stores/redis.js";
import { burstFleet, readCounter } from "../support/hybrid-fleet.js";
import { type RedisServer, startRedis } from "./redis-server.js";

let server: RedisServer;
let cleanup: () => Promise<void>;
let stores: RedisStore[] = [];

beforeAll(async () => {
  ({ server, cleanup } = await startRedis());
  // Four processes' clients on one redis-server, as four gateway workers.
  stores = Array.from({ length: 4 }, () => redisStoreFromUrl(server.url));
  await Promise.all(stores.map((store) => store.ready()));
});

afterAll(async () => {
  await Promise.all(stores.map((store) => store.close()));
  await cleanup?.();
});

const T0 = Date.UTC(2026, 11, 1, 10, 0, 0);

describe("hybrid counting on a real redis-server", () => {
  for (const algorithm of ["fixed-window", "sliding-window"] as const) {
    it(`${algorithm}: four processes, 20 bursts of 400 against a limit of 2,000: never over, nothing lost, few calls`, async () => {
      const policy = definePolicy({
        budget: "5s",
        tiers: {
          anonymous: { global: { limit: 2000, window: "1h", algorithm, counting: "hybrid" } },
        },
      });
      const ip = algorithm === "fixed-window" ? "203.0.113.10" : "203.0.113.11";
      const calls = () => stores.reduce((sum, store) => sum + store.roundTrips, 0);
      const before = calls();
      const result = await burstFleet({
        policy,
        stores,
        ip,
        rounds: 20,
        perProcess: 100,
        start: T0,
        stepMs: 1000,
      });
      const roundTrips = calls() - before;
      expect(result.sent).toBe(8000);
      expect(result.admitted).toBeLessThanOrEqual(2000);
      // Held and never used: a few seconds of one process's traffic at most.
      expect(result.admitted).toBeGreaterThanOrEqual(1800);
      // Every admitted request was counted in Redis first.
      const [state] = await (stores[0] as RedisStore).apply(
        [readCounter(policy, `ip:${ip}`)],
        T0 + 20_000,
      );
      expect(state?.count).toBeGreaterThanOrEqual(result.admitted);
      expect(roundTrips).toBeGreaterThan(0);
    });
  }

  it("steady traffic: a busy subject costs under 0.05 calls a request, where exact costs one per admission", async () => {
    const run = async (counting: "exact" | "hybrid", ip: string) => {
      const policy = definePolicy({
        budget: "5s",
        tiers: { anonymous: { global: { limit: 3000, window: "1h", counting } } },
      });
      const calls = () => stores.reduce((sum, store) => sum + store.roundTrips, 0);
      const before = calls();
      // One request at a time in each of the four processes, 10 ms apart: 400 requests/s.
      const result = await burstFleet({
        policy,
        stores,
        ip,
        rounds: 1000,
        perProcess: 1,
        start: T0 + 3_600_000,
        stepMs: 10,
      });
      const made = calls() - before;
      return { ...result, perRequest: made / result.sent, perAdmitted: made / result.admitted };
    };
    const exact = await run("exact", "198.51.100.20");
    const hybrid = await run("hybrid", "198.51.100.21");
    expect(exact.admitted).toBe(3000);
    // Exact: a call for every admitted request (the refused ones meet the block cache).
    expect(exact.perAdmitted).toBeGreaterThanOrEqual(0.99);
    expect(hybrid.admitted).toBeLessThanOrEqual(3000);
    expect(hybrid.admitted).toBeGreaterThan(2900);
    expect(hybrid.perRequest).toBeLessThan(0.05);
  });

  it("a subject's first request in a window reserves only its own cost: a blind INCRBY, no script and no fence read", async () => {
    const store = redisStoreFromUrl(server.url);
    await store.ready();
    const admin = new Redis({ port: server.port, host: "127.0.0.1" });
    try {
      const limiter = createLimiter({
        policy: definePolicy({
          tiers: { anonymous: { global: { limit: 100, window: "1h", counting: "hybrid" } } },
        }),
        store: hybridCounting(store),
        overrides: false,
      });
      // Warm: the store samples the server's clock on its first call.
      await limiter.check({ ip: "192.0.2.200", path: "/" });
      await admin.config("RESETSTAT");
      const subjects = 50;
      for (let i = 0; i < subjects; i++) {
        const verdict = await limiter.check({ ip: `192.0.2.${i}`, path: "/" });
        expect(verdict.action).toBe("allow");
      }
      const info = await admin.info("commandstats");
      const calls = (name: string) =>
        Number(new RegExp(`^cmdstat_${name}:calls=(\\d+)`, "m").exec(info)?.[1] ?? 0);
      expect(calls("incrby")).toBe(subjects);
      expect(calls("fcall") + calls("evalsha") + calls("eval")).toBe(0);
      expect(calls("get")).toBe(0);
    } finally {
      admin.disconnect();
      await store.close();
    }
  });
});
