import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { Verdict } from "../../src/http/respond.js";
import { createLimiter } from "../../src/limiter.js";
import { definePolicy } from "../../src/policy/load.js";
import { type RedisStore, redisStoreFromUrl } from "../../src/stores/redis.js";
import { CircuitBreaker } from "../../src/stores/remote/breaker.js";
import { freePort, type RedisServer, startRedis } from "./redis-server.js";

const BUDGET_MS = 150;
// Timers on a machine shared by several test suites fire late; the budget is what we check.
const TIMER_SLACK_MS = 150;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("circuit breaker", () => {
  it("opens after N consecutive failures, fails fast for the cooldown, then lets one probe through", () => {
    let now = 0;
    const breaker = new CircuitBreaker({ failureThreshold: 3, cooldownMs: 100 }, () => now);
    breaker.recordFailure();
    breaker.recordFailure();
    breaker.recordSuccess();
    breaker.recordFailure();
    breaker.recordFailure();
    expect(breaker.tryAcquire()).toBe(true);
    breaker.recordFailure();
    expect(breaker.state).toBe("open");
    expect(breaker.tryAcquire()).toBe(false);
    now = 99;
    expect(breaker.tryAcquire()).toBe(false);
    now = 100;
    expect(breaker.tryAcquire()).toBe(true);
    expect(breaker.tryAcquire()).toBe(false);
    breaker.recordFailure();
    expect(breaker.state).toBe("open");
    now = 150;
    expect(breaker.tryAcquire()).toBe(false);
    now = 200;
    expect(breaker.tryAcquire()).toBe(true);
    breaker.recordSuccess();
    expect(breaker.state).toBe("closed");
    expect(breaker.tryAcquire()).toBe(true);
    expect({ opened: breaker.opened, rejected: breaker.rejected }).toEqual({
      opened: 2,
      rejected: 4,
    });
  });
});

describe("a wall clock that steps", () => {
  it("does not hold the breaker open when it steps back an hour", async () => {
    // Only Date is faked: the wall clock, which NTP may set back; timers and the monotonic
    // clock run on.
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      const breaker = new CircuitBreaker({ failureThreshold: 1, cooldownMs: 50 });
      breaker.recordFailure();
      expect(breaker.tryAcquire()).toBe(false);
      vi.setSystemTime(Date.now() - 3_600_000);
      await sleep(80);
      expect(breaker.tryAcquire()).toBe(true);
    } finally {
      vi.useRealTimers();
    }
  });

  it("does not stop a store from counting again when the limiter's clock steps back during an outage", async () => {
    const { server, cleanup } = await startRedis();
    const store = redisStoreFromUrl(server.url);
    try {
      await store.ready();
      let wall = Date.now();
      const limiter = createLimiter({
        store,
        onStoreError: false,
        clock: () => wall,
        policy: definePolicy({ budget: "50ms", tiers: { anonymous: { global: 1_000_000 } } }),
      });
      vi.useFakeTimers({ toFake: ["Date"] });
      process.kill(server.pid as number, "SIGSTOP");
      try {
        // Calls time out after 1 s: the breaker opens.
        for (let i = 0; store.breaker?.state !== "open" && i < 200; i++) {
          await limiter.check({ ip: `10.9.2.${i & 255}`, path: "/" });
          await sleep(20);
        }
        expect(store.breaker?.state).toBe("open");
        // Every call sent before it opened has timed out by now: only a probe can close it.
        await sleep(1200);
        wall -= 3_600_000;
        vi.setSystemTime(wall);
      } finally {
        process.kill(server.pid as number, "SIGCONT");
      }
      const continuedAt = performance.now();
      let reason = "";
      for (let i = 0; reason !== "within-limit" && performance.now() - continuedAt < 3000; i++) {
        reason = (await limiter.check({ ip: `10.9.3.${i & 255}`, path: "/" })).reason;
        await sleep(10);
      }
      expect(reason).toBe("within-limit");
      expect(performance.now() - continuedAt).toBeLessThan(1500);
    } finally {
      vi.useRealTimers();
      await store.close();
      await cleanup();
    }
  }, 20_000);
});

describe("a Redis that is not there", () => {
  it("fails at once instead of queueing the command", async () => {
    const store = redisStoreFromUrl(`redis://127.0.0.1:${await freePort()}`);
    store.client.on("error", () => {});
    try {
      const spec = {
        key: "ip:192.0.2.7|api|global",
        subject: "ip:192.0.2.7",
        algorithm: "fixed-window",
        limit: 5,
        window: { ms: 60_000 },
        cost: 1,
        mode: "enforce",
        ruleId: "anonymous.global",
        namespace: "api",
      } as const;
      const started = performance.now();
      await expect(store.apply([spec], Date.now())).rejects.toMatchObject({
        code: "EL_STORE_FAILED",
      });
      expect(performance.now() - started).toBeLessThan(100);
    } finally {
      await store.close();
    }
  });
});

describe("Redis killed mid-load", () => {
  let server: RedisServer;
  let cleanup: () => Promise<void>;
  let store: RedisStore;

  beforeAll(async () => {
    ({ server, cleanup } = await startRedis());
    store = redisStoreFromUrl(server.url);
    store.client.on("error", () => {});
    await store.ready();
  });

  afterAll(async () => {
    await store?.close();
    await cleanup?.();
  });

  it("counts locally and fails closed within the budget, never hangs, and resumes within a second", async () => {
    const limiter = createLimiter({
      store,
      policy: definePolicy({
        budget: `${BUDGET_MS}ms`,
        failClosed: ["/api/admin/"],
        tiers: {
          anonymous: {
            global: { limit: 1_000_000, window: "1d" },
            paths: { "/api/tight": 3 },
          },
        },
      }),
    });
    interface Sample {
      readonly startedAt: number;
      readonly tookMs: number;
      readonly path: string;
      readonly verdict: Verdict;
    }
    const samples: Sample[] = [];
    let running = true;
    const loop = async (worker: number): Promise<void> => {
      for (let i = 0; running; i++) {
        const path = i % 2 === 0 ? "/api/items" : "/api/admin/users";
        const startedAt = performance.now();
        const verdict = await limiter.check({ ip: `10.9.0.${worker}`, path });
        samples.push({ startedAt, tookMs: performance.now() - startedAt, path, verdict });
        await sleep(2);
      }
    };
    const loops = Array.from({ length: 16 }, (_, worker) => loop(worker));

    await sleep(300);
    const killedAt = performance.now();
    await server.kill();
    await sleep(1000);
    const restartingAt = performance.now();
    await server.start();
    const restartedAt = performance.now();
    let resumedAt: number | undefined;
    while (performance.now() - restartedAt < 3000) {
      const answered = samples.find(
        (sample) => sample.startedAt >= restartedAt && sample.verdict.reason === "within-limit",
      );
      if (answered !== undefined) {
        resumedAt = answered.startedAt + answered.tookMs;
        break;
      }
      await sleep(10);
    }
    running = false;
    await Promise.all(loops);

    const before = samples.filter((sample) => sample.startedAt + sample.tookMs < killedAt);
    const outage = samples.filter(
      (sample) =>
        sample.startedAt > killedAt + 20 && sample.startedAt + sample.tookMs < restartingAt,
    );
    expect(before.length).toBeGreaterThan(0);
    expect(before.every((sample) => sample.verdict.reason === "within-limit")).toBe(true);
    expect(outage.length).toBeGreaterThan(100);
    for (const sample of outage) {
      if (sample.path.startsWith("/api/admin/")) {
        expect(sample.verdict).toMatchObject({ status: 503, reason: "store-failed-closed" });
      } else {
        expect(sample.verdict).toMatchObject({ action: "allow", reason: "store-failed-local" });
      }
    }
    const slowest = Math.max(...samples.map((sample) => sample.tookMs));
    expect(slowest).toBeLessThan(BUDGET_MS + TIMER_SLACK_MS);
    // The breaker kept most outage calls from even trying the dead connection.
    expect(store.breaker?.opened).toBeGreaterThanOrEqual(1);
    expect(store.breaker?.rejected).toBeGreaterThan(outage.length / 2);

    expect(resumedAt).toBeDefined();
    expect((resumedAt as number) - restartedAt).toBeLessThan(1000);

    // Limiting, not just answering: the restarted (empty) Redis counts again.
    const tight: string[] = [];
    for (let i = 0; i < 5; i++) {
      tight.push((await limiter.check({ ip: "10.9.1.1", path: "/api/tight" })).reason);
    }
    // The fifth is answered by the block cache the fourth filled.
    expect(tight).toEqual([
      "within-limit",
      "within-limit",
      "within-limit",
      "over-limit",
      "blocked-cached",
    ]);
  });
});
