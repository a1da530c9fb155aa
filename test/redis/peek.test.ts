/**
 * `limiter.peek` on a real redis-server: after N checks it reports remaining = limit - N for
 * every algorithm (fixed windows counted blindly, fixed windows beside other algorithms in the
 * script, sliding windows, token buckets, hybrid counting), and peeking writes nothing: no write
 * command reaches the server (INFO commandstats), no key changes (DUMP) and none is made.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hybridCounting } from "../../src/core/hybrid-counting.js";
import type { Store } from "../../src/core/types.js";
import { createLimiter } from "../../src/limiter.js";
import { definePolicy } from "../../src/policy/load.js";
import type { PolicyInput } from "../../src/policy/schema.js";
import { RedisStore } from "../../src/stores/redis.js";
import { type RedisServer, startRedis } from "./redis-server.js";

let server: RedisServer;
let cleanup: () => Promise<void>;
let admin: Redis;

beforeAll(async () => {
  ({ server, cleanup } = await startRedis());
  admin = new Redis({ port: server.port, host: "127.0.0.1" });
});

afterAll(async () => {
  admin?.disconnect();
  await cleanup?.();
});

/** Commands that change data; none may run while only peeks are sent. */
const WRITES = new Set([
  "set",
  "setex",
  "psetex",
  "incr",
  "incrby",
  "decrby",
  "del",
  "unlink",
  "expire",
  "pexpire",
  "hset",
  "hincrby",
]);

/** Calls per command since the last `CONFIG RESETSTAT` (commands run by scripts included). */
async function commandCalls(): Promise<Record<string, number>> {
  const info = await admin.info("commandstats");
  const calls: Record<string, number> = {};
  for (const [, name, count] of info.matchAll(/^cmdstat_([a-z|]+):calls=(\d+)/gm)) {
    calls[name as string] = Number(count);
  }
  return calls;
}

interface Snapshot {
  /** Each key's serialised value (DUMP). */
  readonly values: Record<string, string>;
  /** Each key's expiry, ms from now (PTTL). */
  readonly ttls: Record<string, number>;
}

/** Every key under `prefix`, its serialised value and its expiry. */
async function snapshot(prefix: string): Promise<Snapshot> {
  const keys = (await admin.keys(`${prefix}*`)).sort();
  const values: Record<string, string> = {};
  const ttls: Record<string, number> = {};
  for (const key of keys) {
    values[key] = (await admin.dumpBuffer(key))?.toString("hex") ?? "";
    ttls[key] = await admin.pttl(key);
  }
  return { values, ttls };
}

/** The keys once nothing changes them any more (a hybrid top-up may still be on its way). */
async function settled(prefix: string): Promise<Snapshot> {
  let last = await snapshot(prefix);
  for (let attempt = 0; attempt < 20; attempt++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    const next = await snapshot(prefix);
    if (JSON.stringify(next.values) === JSON.stringify(last.values)) return next;
    last = next;
  }
  return last;
}

/** The same keys and values; no expiry set again (each only ran down, by less than `ms`). */
function expectUnchanged(after: Snapshot, before: Snapshot, ms: number): void {
  expect(after.values).toEqual(before.values);
  for (const [key, ttl] of Object.entries(before.ttls)) {
    const now = after.ttls[key] as number;
    expect(now).toBeLessThanOrEqual(ttl);
    expect(now).toBeGreaterThan(ttl - ms);
  }
}

type Setup = { readonly name: string; readonly policy: PolicyInput; readonly hybrid?: boolean };

const rule = (algorithm: "fixed-window" | "sliding-window" | "token-bucket") => ({
  limit: 10,
  window: "600s" as const,
  algorithm,
});

const SETUPS: readonly Setup[] = [
  {
    name: "fixed window (INCRBY without the script)",
    policy: { tiers: { anonymous: { global: rule("fixed-window") } } },
  },
  {
    name: "sliding window",
    policy: { tiers: { anonymous: { global: rule("sliding-window") } } },
  },
  { name: "token bucket", policy: { tiers: { anonymous: { global: rule("token-bucket") } } } },
  {
    name: "fixed window beside a sliding window (the script)",
    policy: {
      tiers: {
        anonymous: { global: rule("fixed-window"), paths: { "/api/": rule("sliding-window") } },
      },
    },
  },
  {
    name: "hybrid counting (fixed window)",
    policy: { tiers: { anonymous: { global: { ...rule("fixed-window"), counting: "hybrid" } } } },
    hybrid: true,
  },
];

describe("limiter.peek on Redis", () => {
  SETUPS.forEach((setup, index) => {
    it(`${setup.name}: after N checks reports remaining = limit - N; 100 peeks write nothing`, async () => {
      // The caller's clock, stopped: a token bucket refills nothing between checks.
      const now = Date.now();
      const redis = new RedisStore({
        client: server.url,
        clock: "caller",
        prefix: `peek${index}:`,
      });
      const store: Store = setup.hybrid === true ? hybridCounting(redis) : redis;
      try {
        await redis.ready();
        const limiter = createLimiter({
          policy: definePolicy(setup.policy),
          store,
          clock: () => now,
          onStoreError: false,
        });
        const request = { ip: "203.0.113.7", path: "/api/search" };
        const checks = 4;
        let last = await limiter.check(request);
        for (let i = 1; i < checks; i++) last = await limiter.check(request);
        expect(last.action).toBe("allow");

        const prefix = `peek${index}:`;
        const before = await settled(prefix);
        const peeking = Date.now();
        await admin.config("RESETSTAT");
        let peek = await limiter.peek(request);
        for (let i = 1; i < 100; i++) peek = await limiter.peek(request);
        // A subject never counted: a peek makes no key for it.
        const fresh = await limiter.peek({ ...request, ip: "198.51.100.9" });
        const calls = await commandCalls();

        expect(peek.storeError).toBeUndefined();
        expect(peek.rules.length).toBeGreaterThan(0);
        for (const peeked of peek.rules) {
          if (setup.hybrid === true) {
            // The store's count: this process reserved ahead, so at most limit - N is left.
            expect(peeked.remaining).toBeLessThanOrEqual(10 - checks);
          } else expect(peeked.remaining).toBe(10 - checks);
          expect(peeked.reset).toBeGreaterThanOrEqual(Math.floor(now / 1000));
        }
        expect(peek.rules.find((r) => r.rule === last.rule)?.reset).toBe(last.reset);
        expect(fresh.rules.map((r) => r.remaining)).toEqual(fresh.rules.map(() => 10));
        expect(Object.keys(calls).filter((name) => WRITES.has(name))).toEqual([]);
        // The peeks did reach the server: reads (blind fixed windows) or the script.
        const reads = (calls.get ?? 0) + (calls.fcall ?? 0) + (calls.evalsha ?? 0);
        expect(reads).toBeGreaterThanOrEqual(101);
        expectUnchanged(await snapshot(prefix), before, Date.now() - peeking + 1000);

        // And the count is as the checks left it: the next check sees limit - N - 1.
        if (setup.hybrid !== true) {
          expect((await limiter.check(request)).remaining).toBe(10 - checks - 1);
        }
      } finally {
        await store.close?.();
      }
    });
  });
});
