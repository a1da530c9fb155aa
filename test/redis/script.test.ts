import { createHash } from "node:crypto";
import fc from "fast-check";
import { Cluster, Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AlgorithmName, CounterSpec, CounterState, WindowSpec } from "../../src/core/types.js";
import { LATE_GRACE_MS } from "../../src/core/windows.js";
import { MemoryStore } from "../../src/stores/memory.js";
import {
  APPLY_COUNTERS_LUA,
  APPLY_COUNTERS_SHA,
  createRedisClient,
  RedisStore,
} from "../../src/stores/redis.js";
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

function counter(
  subject: string,
  scope: string,
  algorithm: AlgorithmName,
  limit: number,
  window: WindowSpec,
  cost = 1,
  mode: "enforce" | "observe" = "enforce",
): CounterSpec {
  return {
    key: `${subject}|api|${scope}`,
    subject,
    algorithm,
    limit,
    window,
    cost,
    mode,
    ruleId: `anonymous.${scope}`,
    namespace: "api",
  };
}

/** -0 and 0 are the same count; Lua replies never carry the sign of zero. */
function plain(states: CounterState[]): CounterState[] {
  return states.map((state) => ({
    allowed: state.allowed,
    count: state.count + 0,
    remaining: state.remaining + 0,
    resetAt: state.resetAt + 0,
    retryAfterMs: state.retryAfterMs + 0,
  }));
}

describe("the apply-counters script", () => {
  it("has the SHA1 that SCRIPT LOAD reports", async () => {
    const loaded = await admin.script("LOAD", APPLY_COUNTERS_LUA);
    expect(loaded).toBe(APPLY_COUNTERS_SHA);
    expect(createHash("sha1").update(APPLY_COUNTERS_LUA).digest("hex")).toBe(APPLY_COUNTERS_SHA);
  });

  it("falls back to EVAL when the server lost the script, then uses EVALSHA again", async () => {
    const store = new RedisStore({ client: server.url, prefix: "noscript:" });
    await store.ready();
    try {
      await admin.script("FLUSH");
      const spec = [counter("ip:198.51.100.1", "global", "fixed-window", 5, { ms: 60_000 })];
      const first = await store.apply(spec, Date.now());
      expect(first[0]?.count).toBe(1);
      expect(store.roundTrips).toBe(2);
      const second = await store.apply(spec, Date.now());
      expect(second[0]?.count).toBe(2);
      expect(store.roundTrips).toBe(3);
    } finally {
      await store.close();
    }
  });

  it("caches the script again after every reconnection, before traffic needs it", async () => {
    const store = new RedisStore({ client: server.url, prefix: "reload:" });
    await store.ready();
    try {
      await admin.script("FLUSH");
      const reconnected = new Promise((resolve) => store.client.once("ready", resolve));
      store.client.disconnect(true);
      await reconnected;
      const deadline = Date.now() + 2000;
      while (((await admin.script("EXISTS", APPLY_COUNTERS_SHA)) as number[])[0] !== 1) {
        if (Date.now() > deadline) throw new Error("script was not loaded after reconnecting");
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      const spec = [counter("ip:198.51.100.2", "global", "fixed-window", 5, { ms: 60_000 })];
      await store.apply(spec, Date.now());
      expect(store.roundTrips).toBe(1);
    } finally {
      await store.close();
    }
  });

  it("stores each counter under its subject's hash tag and expires it with the window, and the late grace", async () => {
    const store = new RedisStore({ client: server.url, prefix: "layout:" });
    await store.ready();
    try {
      const spec = counter("ip:203.0.113.9", "global", "fixed-window", 5, { ms: 60_000 });
      await store.apply([spec], Date.now());
      const key = "layout:{ip:203.0.113.9}|api|global";
      expect(store.redisKey(spec)).toBe(key);
      const expireAt = await admin.pexpiretime(key);
      const serverNow = Number((await admin.time())[0]) * 1000;
      // The window's end, and LATE_GRACE_MS for a request that arrives late.
      expect(expireAt % 60_000).toBe(LATE_GRACE_MS);
      expect(expireAt).toBeGreaterThan(serverNow);
      expect(expireAt).toBeLessThanOrEqual(serverNow + 60_000 + LATE_GRACE_MS + 1000);
    } finally {
      await store.close();
    }
  });

  it("reads the time from the Redis server, not from the caller", async () => {
    const store = new RedisStore({ client: server.url, prefix: "servertime:" });
    await store.ready();
    try {
      const spec = [counter("ip:192.0.2.1", "global", "fixed-window", 1, { ms: 3_600_000 })];
      // A caller ten hours fast must not land in another window: the server's clock decides.
      const skewed = Date.now() + 10 * 3_600_000;
      const [state] = await store.apply(spec, skewed);
      const serverNow = Number((await admin.time())[0]) * 1000;
      expect(state?.resetAt).toBe(Math.floor(serverNow / 3_600_000) * 3_600_000 + 3_600_000);
    } finally {
      await store.close();
    }
  });

  it("applies the same three phases as the memory store (refused requests count only where refused)", async () => {
    const store = new RedisStore({ client: server.url, prefix: "phases:", clock: "caller" });
    await store.ready();
    const memory = new MemoryStore();
    try {
      const now = Date.now() + 86_400_000;
      const subject = "user:u_1";
      const request = [
        counter(subject, "tight", "fixed-window", 2, { ms: 60_000 }),
        counter(subject, "loose", "token-bucket", 100, { ms: 60_000 }),
        counter(subject, "shadow", "sliding-window", 1, { ms: 60_000 }, 1, "observe"),
      ];
      for (let i = 0; i < 4; i++) {
        expect(plain(await store.apply(request, now + i))).toEqual(
          plain(memory.applySync(request, now + i)),
        );
      }
      const [tight, loose, shadow] = await store.apply(request, now + 10);
      expect(tight).toMatchObject({ allowed: false, count: 5 });
      // The token bucket never paid for the two refused requests.
      expect(loose).toMatchObject({ allowed: true, count: 2 });
      expect(shadow).toMatchObject({ allowed: false, count: 5 });
    } finally {
      await store.close();
    }
  });
});

const windows: fc.Arbitrary<WindowSpec> = fc.oneof(
  fc.constantFrom<WindowSpec>({ ms: 1_000 }, { ms: 7_000 }, { ms: 60_000 }, { ms: 86_400_000 }),
  fc.constantFrom<WindowSpec>({ months: 1 }, { months: 3 }),
);

const counterShape = fc.record({
  algorithm: fc.constantFrom<AlgorithmName>("fixed-window", "sliding-window", "token-bucket"),
  limit: fc.integer({ min: 0, max: 12 }),
  window: windows,
  observe: fc.boolean(),
});

const step = fc.record({
  advanceMs: fc.oneof(
    fc.integer({ min: 0, max: 400 }),
    fc.integer({ min: 0, max: 90_000 }),
    fc.integer({ min: 0, max: 40 * 86_400_000 }),
  ),
  mask: fc.integer({ min: 1, max: 7 }),
  cost: fc.integer({ min: 1, max: 3 }),
});

describe("Lua and TypeScript algorithms", () => {
  it("give identical states for the same random request sequences", async () => {
    const store = new RedisStore({ client: server.url, prefix: "parity:", clock: "caller" });
    await store.ready();
    let run = 0;
    try {
      await fc.assert(
        fc.asyncProperty(
          fc.array(counterShape, { minLength: 3, maxLength: 3 }),
          fc.array(step, { minLength: 1, maxLength: 40 }),
          async (shapes, steps) => {
            run++;
            const memory = new MemoryStore();
            const subject = `user:run${run}`;
            const specs = shapes.map((shape, index) =>
              counter(
                subject,
                `c${index}`,
                shape.algorithm,
                shape.limit,
                shape.window,
                1,
                shape.observe ? "observe" : "enforce",
              ),
            );
            // A day ahead of the real clock, so that Redis never expires a key the simulated
            // clock still considers live.
            let now = Date.now() + 86_400_000 + (run % 997);
            for (const { advanceMs, mask, cost } of steps) {
              now += advanceMs;
              const request = specs
                .filter((_, index) => (mask & (1 << index)) !== 0)
                .map((spec) => ({ ...spec, cost }));
              const fromRedis = plain(await store.apply(request, now));
              const fromMemory = plain(memory.applySync(request, now));
              expect(fromRedis).toEqual(fromMemory);
            }
          },
        ),
        { numRuns: 80, seed: 20_240_601 },
      );
    } finally {
      await store.close();
    }
  });
});

describe("batched requests", () => {
  it("apply in arrival order, each all-or-nothing, as the memory store would one by one", async () => {
    const store = new RedisStore({ client: server.url, prefix: "batch:", clock: "caller" });
    await store.ready();
    const memory = new MemoryStore();
    try {
      const now = Date.now() + 86_400_000;
      const shared = counter("ip:198.51.100.9", "shared", "sliding-window", 40, { ms: 60_000 });
      const requests = Array.from({ length: 200 }, (_, index) => [
        shared,
        counter(
          "ip:198.51.100.9",
          `own${index % 3}`,
          "token-bucket",
          20,
          { ms: 60_000 },
          1 + (index % 2),
        ),
      ]);
      const before = store.roundTrips;
      const fromRedis = await Promise.all(requests.map((request) => store.apply(request, now)));
      const fromMemory = requests.map((request) => memory.applySync(request, now));
      expect(fromRedis.map(plain)).toEqual(fromMemory.map(plain));
      // 200 requests in one tick: a handful of script calls of at most 64 requests each.
      expect(store.roundTrips - before).toBe(Math.ceil(200 / 64));
    } finally {
      await store.close();
    }
  });
});

describe("redis URLs", () => {
  it("understand redis://host:port/db and redis+cluster://host:port,host:port", async () => {
    const single = createRedisClient(`redis://127.0.0.1:${server.port}/3`);
    try {
      expect(single).toBeInstanceOf(Redis);
      expect((single as Redis).options.db).toBe(3);
      expect((single as Redis).options.enableOfflineQueue).toBe(false);
    } finally {
      single.disconnect();
    }
    const cluster = createRedisClient("redis+cluster://127.0.0.1:1,127.0.0.1:2");
    try {
      expect(cluster).toBeInstanceOf(Cluster);
      expect(cluster.options.enableOfflineQueue).toBe(false);
    } finally {
      cluster.disconnect();
    }
    expect(() => createRedisClient("http://127.0.0.1:6379")).toThrow(/redis:\/\//);
    expect(() => createRedisClient("redis+cluster://")).toThrow(/at least one node/);
  });
});
