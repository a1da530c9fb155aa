/**
 * A call Redis refuses for its data (an error reply) is Redis answering, not Redis failing: it
 * fails that call, and never opens the breaker that would send every other rule to its fail mode.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CounterSpec, Store } from "../../src/core/types.js";
import { createLimiter } from "../../src/limiter.js";
import { definePolicy } from "../../src/policy/load.js";
import { RedisStore } from "../../src/stores/redis.js";
import { RedisRestStore } from "../../src/stores/redis-rest.js";
import { type RedisRestBridge, startRedisRestBridge } from "../support/redis-rest-bridge.js";
import { withinOneWindow } from "../support/windows.js";
import { type RedisServer, startRedis } from "./redis-server.js";

let server: RedisServer;
let bridge: RedisRestBridge;
let admin: Redis;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  ({ server, cleanup } = await startRedis());
  bridge = await startRedisRestBridge(server.url);
  admin = new Redis({ port: server.port, host: "127.0.0.1" });
});

afterAll(async () => {
  admin?.disconnect();
  await bridge?.close();
  await cleanup?.();
});

function counter(
  subject: string,
  window: CounterSpec["window"],
  algorithm: CounterSpec["algorithm"] = "fixed-window",
): CounterSpec {
  return {
    key: `${subject}|q|`,
    subject,
    algorithm,
    limit: 5,
    window,
    cost: 1,
    mode: "enforce",
    ruleId: "q",
    namespace: "q",
  };
}

const stores: Record<string, () => Store & { close(): Promise<void> }> = {
  redis: () => new RedisStore({ client: server.url, maxBatch: 1, prefix: "node:" }),
  "redis over HTTP": () =>
    new RedisRestStore({ url: bridge.url, token: bridge.token, maxBatch: 1, prefix: "rest:" }),
};

describe.each(Object.keys(stores))("a call %s refuses", (name) => {
  it("fails alone: ten refused calls leave the breaker closed for the next subject", async () => {
    const store = (stores[name] as () => Store & { close(): Promise<void> })();
    try {
      // A window no policy accepts any more (it is refused at load): Redis cannot write its
      // expiry ("ERR value is not an integer or out of range"). A sliding window, so that the
      // script refuses the call itself (the Redis store counts a fixed window with INCRBY, and
      // sends its expiry after answering).
      const absurd = counter("ip:198.51.100.1", { ms: 1e23 }, "sliding-window");
      for (let i = 0; i < 10; i++) {
        await expect(store.apply([absurd], Date.now())).rejects.toThrow(/not an integer/);
      }
      const [state] = await store.apply([counter("ip:198.51.100.2", { ms: 60_000 })], Date.now());
      expect(state).toMatchObject({ allowed: true, count: 1 });
      expect(store.traits?.status?.().state ?? "ok").not.toBe("open");
    } finally {
      await store.close();
    }
  });
});

describe("a counter key another program overwrote", () => {
  it("fails its own rule's calls to the fail mode; the other rules go on counting in Redis", async () => {
    const store = new RedisStore({ client: server.url, prefix: "refused:" });
    const errors: string[] = [];
    const limiter = createLimiter({
      store,
      onStoreError: (error) => errors.push(error instanceof Error ? error.message : String(error)),
      policy: definePolicy({
        version: 1,
        identity: { ip: { source: "socket" } },
        tiers: { anonymous: { global: 100 } },
        namespaces: { login: { match: { path: "/login" }, limit: 50 } },
      }),
    });
    try {
      await store.ready();
      // The overwritten key is this minute's window key: the checks below must stay in its minute.
      await withinOneWindow(60_000, 2_000);
      const login = { ip: "198.51.100.9", method: "POST", path: "/login" };
      expect((await limiter.check(login)).reason).toBe("within-limit");
      const [key] = await admin.keys("refused:*|login|*");
      expect(key).toBeDefined();
      await admin.del(key as string);
      await admin.hset(key as string, "written", "by another program");
      for (let i = 0; i < 10; i++) {
        expect((await limiter.check(login)).reason).toBe("store-failed-local");
      }
      expect(errors).toHaveLength(10);
      expect(errors[0]).toMatch(/WRONGTYPE/);
      const other = await limiter.check({ ip: "198.51.100.10", path: "/" });
      expect(other.reason).toBe("within-limit");
      expect(other.storeError).toBeUndefined();
      expect(store.breaker?.state).toBe("closed");
      // Health pages still see the refusals.
      expect(store.status()).toMatchObject({ failures: 10, breakerOpened: 0 });
    } finally {
      await store.close();
    }
  });
});

describe("the longest windows a policy accepts", () => {
  it("are counted in Redis: 366d, 52w and 12mo, fixed and sliding", async () => {
    const store = new RedisStore({ client: server.url, prefix: "longest:" });
    try {
      await store.ready();
      const policy = definePolicy({
        version: 1,
        identity: { ip: { source: "socket" } },
        namespaces: {
          year: { match: { path: "/year" }, limit: 2, window: "366d" },
          weeks: {
            match: { path: "/weeks" },
            limit: 2,
            window: "52w",
            algorithm: "sliding-window",
          },
          months: { match: { path: "/months" }, limit: 2, window: "12mo" },
        },
      });
      const limiter = createLimiter({ store, policy });
      for (const path of ["/year", "/weeks", "/months"]) {
        const actions: string[] = [];
        for (let i = 0; i < 3; i++) {
          actions.push((await limiter.check({ ip: "198.51.100.20", path })).action);
        }
        expect(actions, path).toEqual(["allow", "allow", "block"]);
      }
      // A fixed window's key lives until its window ends (plus 2 s of grace), however far off that
      // is: the 366-day window from the epoch, and the calendar year for 12 months. A sliding
      // window's key outlives its window by one more window.
      const now = Date.now();
      const day = 86_400_000;
      const untilEnd: Record<string, number> = {
        year: 366 * day - (now % (366 * day)),
        months: Date.UTC(new Date(now).getUTCFullYear() + 1, 0, 1) - now,
        weeks: 52 * 7 * day,
      };
      const keys = await admin.keys("longest:*");
      expect(keys.length).toBeGreaterThanOrEqual(3);
      for (const key of keys) {
        const name = /\|(year|weeks|months)\|/.exec(key)?.[1];
        expect(name, key).toBeDefined();
        const end = untilEnd[name as string] as number;
        const ttl = await admin.pttl(key);
        expect(ttl, key).toBeGreaterThan(end - 60_000);
        // Plus a second: the expiry is set on Redis's clock, from a duration rounded up.
        if (name !== "weeks") expect(ttl, key).toBeLessThanOrEqual(end + 2_000 + 1_000);
      }
    } finally {
      await store.close();
    }
  });
});
