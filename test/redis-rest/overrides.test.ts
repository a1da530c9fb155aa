/**
 * Overrides in Redis over HTTP: the Redis store's keys and change script, carried by the REST
 * protocol (a bridge in front of a real redis-server). Two limiters on the REST store share
 * them; one set through ioredis is read over HTTP (the same layout); a request sends the same
 * HTTP requests with overrides present as without.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLimiter } from "../../src/limiter.js";
import { definePolicy } from "../../src/policy/load.js";
import { RedisStore } from "../../src/stores/redis.js";
import { redisRestStore } from "../../src/stores/redis-rest.js";
import { startRedis } from "../redis/redis-server.js";
import { type RedisRestBridge, startRedisRestBridge } from "../support/redis-rest-bridge.js";
import { within } from "../support/within.js";

let stopRedis: () => Promise<void>;
let redisUrl: string;
let bridge: RedisRestBridge;

beforeAll(async () => {
  const started = await startRedis();
  stopRedis = started.cleanup;
  redisUrl = started.server.url;
  bridge = await startRedisRestBridge(redisUrl);
});

afterAll(async () => {
  await bridge?.close();
  await stopRedis?.();
});

const policyInput = {
  version: 1,
  identity: { ip: { source: "socket" } },
  tiers: { anonymous: { global: { limit: 2, window: "1h" } } },
  overrides: { maxLimit: 100 },
} as const;
const policy = definePolicy(policyInput);

const rest = (prefix: string) => redisRestStore({ url: bridge.url, token: bridge.token, prefix });

describe("overrides in Redis over HTTP", () => {
  it("are shared by limiters on the store, and read what ioredis wrote, in the same keys", async () => {
    const prefix = "rest-ov-a:";
    const a = createLimiter({ policy, store: rest(prefix), overrides: { refreshMs: 50 } });
    const b = createLimiter({ policy, store: rest(prefix), overrides: { refreshMs: 50 } });
    const redis = new RedisStore({ client: redisUrl, prefix });
    const viaRedis = createLimiter({ policy, store: redis, overrides: { refreshMs: 50 } });
    try {
      const request = { ip: "198.51.100.71", path: "/" };
      for (let i = 0; i < 2; i++) expect((await a.check(request)).action).toBe("allow");
      expect((await b.check(request)).action).toBe("block");
      await a.overrides.set({ subject: "ip:198.51.100.71", limit: 5, note: "ticket 9" });
      expect((await a.check(request)).action).toBe("allow");
      await within(
        async () => (await b.check(request)).action === "allow",
        "the limit on b",
        10_000,
        20,
      );
      expect(await b.overrides.list()).toEqual([
        expect.objectContaining({ subject: "ip:198.51.100.71", effect: "limit", limit: 5 }),
      ]);
      // Set through ioredis, read over HTTP; the log holds both changes, oldest first.
      await viaRedis.overrides.set({ subject: "ip:198.51.100.72", block: "abuse" });
      await within(
        async () => (await b.check({ ip: "198.51.100.72", path: "/" })).status === 403,
        "the block on b",
        10_000,
        20,
      );
      expect((await b.overrides.changes()).map((change) => change.subject)).toEqual([
        "ip:198.51.100.71",
        "ip:198.51.100.72",
      ]);
      expect(await b.overrides.remove({ subject: "ip:198.51.100.72" })).toBe(true);
      await within(
        async () => (await viaRedis.check({ ip: "198.51.100.72", path: "/" })).status !== 403,
        "the removal via ioredis",
        10_000,
        20,
      );
    } finally {
      for (const limiter of [a, b, viaRedis]) limiter.close();
      await redis.close();
    }
  });

  it("costs a request no HTTP request: the same with overrides present as without", async () => {
    const prefix = "rest-ov-b:";
    // Refreshed only at start within this test: the background reads are not what it counts.
    // Every check counted (no block cache, whose reads go by the clock).
    const roomy = definePolicy({ ...policyInput, tiers: { anonymous: { global: 1000 } } });
    const limiter = createLimiter({
      policy: roomy,
      store: rest(prefix),
      overrides: { refreshMs: 60_000 },
    });
    try {
      const sent = () => Object.values(bridge.requests).reduce((sum, count) => sum + count, 0);
      const decide = async (ip: string) => {
        const before = sent();
        for (let i = 0; i < 5; i++) await limiter.check({ ip, path: "/" });
        return sent() - before;
      };
      await limiter.check({ ip: "198.51.100.80", path: "/" }); // the store's first calls
      // The watch's first read (HMGET, then HGETALL) runs in the background: let it land (no
      // request for 200 ms), however busy the machine.
      for (let last = -1, waited = 0; last !== sent() && waited < 10_000; waited += 200) {
        last = sent();
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      const without = await decide("198.51.100.81");
      await limiter.overrides.set({ subject: "ip:198.51.100.90", limit: 50 });
      const withOverride = await decide("198.51.100.82");
      expect(without).toBe(5);
      expect(withOverride).toBe(without);
    } finally {
      limiter.close();
    }
  });
});
