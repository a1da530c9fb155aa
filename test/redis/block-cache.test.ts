import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLimiter } from "../../src/limiter.js";
import { definePolicy } from "../../src/policy/load.js";
import { RedisStore } from "../../src/stores/redis.js";
import { withinOneWindow } from "../support/windows.js";
import { type RedisServer, startRedis } from "./redis-server.js";

let server: RedisServer;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  ({ server, cleanup } = await startRedis());
});

afterAll(async () => {
  await cleanup?.();
});

/** Calls that counted: the script's, and the fixed windows' increments (one counter a call here). */
async function countingCalls(admin: Redis): Promise<number> {
  const info = await admin.info("commandstats");
  let calls = 0;
  for (const match of info.matchAll(/^cmdstat_(?:fcall|evalsha|eval|incrby):calls=(\d+)/gm)) {
    calls += Number(match[1]);
  }
  return calls;
}

async function commandCalls(admin: Redis, command: string): Promise<number> {
  const info = await admin.info("commandstats");
  return Number(new RegExp(`^cmdstat_${command}:calls=(\\d+)`, "m").exec(info)?.[1] ?? 0);
}

describe("the block cache in front of Redis", () => {
  it("answers the seed's attack (one IP at 800/s against 60/min, 60 s) with 120 counting calls and one read of the reset log a second", async () => {
    // Simulated time, one day ahead of the real clock so that Redis keeps the keys it is given.
    const store = new RedisStore({ client: server.url, clock: "caller" });
    const admin = new Redis({ port: server.port, host: "127.0.0.1" });
    try {
      await store.ready();
      await admin.config("RESETSTAT");
      const windowStart = Math.ceil((Date.now() + 86_400_000) / 60_000) * 60_000;
      let now = windowStart;
      // Overrides are read in the background on the real clock (an HMGET every 5 s), however
      // long this loop takes; they are not what this counts.
      const limiter = createLimiter({
        store,
        clock: () => now,
        overrides: false,
        policy: definePolicy({
          budget: "5s",
          tiers: {
            anonymous: {
              global: { limit: 60, window: "60s", action: "challenge", challengeBand: 2 },
            },
          },
        }),
      });
      const reasons: Record<string, number> = {};
      const requests = 800 * 60;
      for (let i = 0; i < requests; i++) {
        now = windowStart + Math.floor((i * 1000) / 800);
        const verdict = await limiter.check({ ip: "203.0.113.66", path: "/api/search" });
        reasons[verdict.reason] = (reasons[verdict.reason] ?? 0) + 1;
      }
      // 60 admitted, 59 challenged (count under 2x), the 120th blocked in Redis; the rest locally.
      expect(reasons).toEqual({
        "within-limit": 60,
        "challenge-band": 59,
        "over-limit": 1,
        "blocked-cached": requests - 120,
      });
      expect(store.roundTrips).toBe(120);
      expect(await countingCalls(admin)).toBe(120);
      // And 60 reads of the reset log (an HMGET each, no script), so that a reset made by another
      // process reaches this one's block cache within a second: one with the first call, then
      // one a second while the blocked client knocks (core/reset-watch.ts).
      expect(await commandCalls(admin, "hmget")).toBe(60);
      expect(limiter.blockCacheHits).toBe(requests - 120);
      const blocked = requests - 119;
      expect(store.roundTrips / blocked).toBeLessThanOrEqual(0.01);
    } finally {
      admin.disconnect();
      await store.close();
    }
  });
});

describe("resetting counters in Redis", () => {
  it("deletes the subject's keys for the rules named, and the block cache forgets the block", async () => {
    const store = new RedisStore({ client: server.url });
    const policy = definePolicy({
      version: 1,
      identity: { ip: { source: "socket" } },
      tiers: { anonymous: { global: 100 } },
      namespaces: { login: { match: { path: "/login" }, limit: 2 } },
    });
    const limiter = createLimiter({ policy, store });
    try {
      await store.ready();
      // The login rule's minute window on the real clock: the sequence must not straddle its end.
      await withinOneWindow(60_000, 2_000);
      const login = { ip: "198.51.100.40", method: "POST", path: "/login" };
      const actions: string[] = [];
      for (let i = 0; i < 4; i++) actions.push((await limiter.check(login)).action);
      expect(actions).toEqual(["allow", "allow", "block", "block"]);
      expect(limiter.blockCacheHits).toBe(1);
      await limiter.reset(login, ["login"]);
      const after = await limiter.check(login);
      expect(after.action).toBe("allow");
      expect(after.reason).toBe("within-limit");
      expect(after.outcomes.find((outcome) => outcome.ruleId === "login")?.state.count).toBe(1);
    } finally {
      await store.close();
    }
  });
});
