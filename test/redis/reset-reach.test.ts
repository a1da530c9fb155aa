/**
 * `limiter.reset` in one process reaches every other process's block cache within a second
 * (`RESET_CHECK_MS`): two limiters, each with its own store client and block cache, on one real
 * redis-server, directly and over HTTP.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Store } from "../../src/core/types.js";
import { createLimiter } from "../../src/limiter.js";
import { definePolicy } from "../../src/policy/load.js";
import { RedisStore } from "../../src/stores/redis.js";
import { RedisRestStore } from "../../src/stores/redis-rest.js";
import { type RedisRestBridge, startRedisRestBridge } from "../support/redis-rest-bridge.js";
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

/**
 * Commands the server ran since start: the calls that count (script calls, and a fixed window's
 * INCRBY, which the Redis store sends without the script), and the log's reads.
 */
async function commandCalls(): Promise<{ counting: number; hmget: number }> {
  const info = await admin.info("commandstats");
  const calls = (name: string) =>
    Number(new RegExp(`^cmdstat_${name}:calls=(\\d+)`, "m").exec(info)?.[1] ?? 0);
  const counting = calls("fcall") + calls("evalsha") + calls("eval") + calls("incrby");
  return { counting, hmget: calls("hmget") };
}

/** The documented bound: a reset reaches another process's block cache within this. */
const RESET_CHECK_MS = 1000;

type Client = Store & { close(): Promise<void> };

const stores: Record<string, (prefix: string) => Client> = {
  redis: (prefix) => new RedisStore({ client: server.url, clock: "caller", prefix }),
  "redis over HTTP": (prefix) =>
    new RedisRestStore({ url: bridge.url, token: bridge.token, clock: "caller", prefix }),
};

const policy = definePolicy({
  version: 1,
  budget: "5s",
  identity: { ip: { source: "socket" } },
  tiers: { anonymous: { global: 1000 } },
  namespaces: { login: { match: { path: "/login", methods: ["POST"] }, limit: 3, window: "15m" } },
});

describe.each(Object.keys(stores))("a reset on %s", (name) => {
  it("reaches the other process's block cache within a second, and a blocked key still costs no call of its own", async () => {
    const prefix = `reach-${name.replace(/\W/g, "")}:`;
    const make = stores[name] as (prefix: string) => Client;
    const [storeA, storeB] = [make(prefix), make(prefix)];
    // Simulated time a day ahead, so that Redis keeps the keys it is given.
    let now = Math.ceil((Date.now() + 86_400_000) / 900_000) * 900_000;
    const clock = () => now;
    const a = createLimiter({ store: storeA, policy, clock });
    const b = createLimiter({ store: storeB, policy, clock });
    try {
      const login = { ip: "198.51.100.77", method: "POST", path: "/login" };
      // Three logins spend the limit; each process then learns of the block and caches it.
      for (let i = 0; i < 3; i++) expect((await a.check(login)).action).toBe("allow");
      for (const limiter of [a, b]) {
        expect((await limiter.check(login)).reason).toBe("over-limit");
        now += 10;
        expect((await limiter.check(login)).reason).toBe("blocked-cached");
      }

      // B hammers the blocked key for 10 s at 100 requests/s: at most one read of the reset log
      // a second, and no call of the key's own.
      const before = await commandCalls();
      for (let i = 0; i < 1000; i++) {
        now += 10;
        expect((await b.check(login)).reason).toBe("blocked-cached");
      }
      const after = await commandCalls();
      expect(after.counting - before.counting).toBe(0);
      expect(after.hmget - before.hmget).toBe(10);

      // A login succeeds on A, which resets its failures.
      now += 10;
      await a.reset(login, ["login"]);
      const resetAt = now;
      expect((await a.check(login)).action).toBe("allow");

      // B admits again within the bound; before it, it may still refuse from its cache.
      let admittedAt: number | undefined;
      while (now - resetAt <= RESET_CHECK_MS + 10) {
        now += 10;
        const verdict = await b.check(login);
        if (verdict.action === "allow") {
          admittedAt = now;
          break;
        }
        expect(verdict.reason).toBe("blocked-cached");
      }
      expect(admittedAt, "B never admitted within the bound").toBeDefined();
      expect((admittedAt as number) - resetAt).toBeLessThanOrEqual(RESET_CHECK_MS + 10);
    } finally {
      await storeA.close();
      await storeB.close();
    }
  });
});
