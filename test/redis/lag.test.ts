import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CounterSpec } from "../../src/core/types.js";
import { createLimiter } from "../../src/limiter.js";
import { definePolicy } from "../../src/policy/load.js";
import { RedisStore } from "../../src/stores/redis.js";
import { withinOneWindow } from "../support/windows.js";
import { type RedisServer, startRedis } from "./redis-server.js";

/** Holds the event loop, as a burst of our own work does. */
function busyFor(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // spin
  }
}

const counter = (key: string, limit: number): CounterSpec => ({
  key,
  subject: key,
  algorithm: "fixed-window",
  limit,
  window: { ms: 60_000 },
  cost: 1,
  mode: "enforce",
  ruleId: "test.global",
  namespace: "default",
});

describe("a healthy Redis behind a busy process", () => {
  let server: RedisServer;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    ({ server, cleanup } = await startRedis());
  });
  afterAll(async () => {
    await cleanup();
  });

  it("never counts our own lag as a store failure, so the breaker stays closed", async () => {
    const store = new RedisStore({ client: server.url, timeoutMs: 200 });
    try {
      await store.ready();
      // Each call's reply is back within a millisecond, but the loop is held for 2x the store's
      // own timeout before it can read it, five times: the breaker's threshold.
      for (let round = 0; round < 5; round++) {
        const answer = store.apply([counter(`lag:${round}`, 3)], Date.now());
        // The store sends on the next tick (it batches a tick's requests), then we are busy.
        await new Promise((resolve) => process.nextTick(resolve));
        busyFor(400);
        const [state] = await answer;
        expect(state?.allowed).toBe(true);
        expect(state?.count).toBe(1);
      }
      expect(store.breaker?.state).toBe("closed");
      expect(store.breaker?.opened).toBe(0);
    } finally {
      await store.close();
    }
  });

  it("decides every request of a burst whose replies wait behind the burst, exactly", async () => {
    const store = new RedisStore({ client: server.url });
    const reasons = new Map<string, number>();
    const policy = definePolicy({
      version: 1,
      identity: { ip: { source: "socket" } },
      tiers: { anonymous: { global: 30 } },
    });
    const limiter = createLimiter({
      policy,
      store,
      onDecision: (verdict) => reasons.set(verdict.reason, (reasons.get(verdict.reason) ?? 0) + 1),
    });
    try {
      await store.ready();
      // `global: 30` counts in minute windows on the real clock: the burst must not straddle one.
      await withinOneWindow(60_000, 2_000);
      const verdicts = [];
      for (let i = 0; i < 300; i++) {
        verdicts.push(limiter.check({ ip: "198.51.100.7", method: "GET", path: "/api/search" }));
        // 300 x 0.5 ms of our own work after the first request was sent: 3x the budget.
        busyFor(0.5);
      }
      const settled = await Promise.all(verdicts);
      expect(settled.filter((verdict) => verdict.action === "allow")).toHaveLength(30);
      const failed = [...reasons].filter(([reason]) => reason.startsWith("store-failed"));
      expect(failed).toEqual([]);
      expect(reasons.get("within-limit")).toBe(30);
    } finally {
      await store.close();
    }
  });
});

describe("a Redis that really stops answering", () => {
  let server: RedisServer;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    ({ server, cleanup } = await startRedis());
  });
  afterAll(async () => {
    if (server.pid !== undefined) process.kill(server.pid, "SIGCONT");
    await cleanup();
  });

  it("times calls out on its own timeout, opens the breaker, and closes it once Redis is back", async () => {
    const store = new RedisStore({
      client: server.url,
      timeoutMs: 100,
      breaker: { failureThreshold: 3, cooldownMs: 100 },
    });
    try {
      await store.ready();
      process.kill(server.pid as number, "SIGSTOP");
      for (let round = 0; round < 3; round++) {
        await expect(store.apply([counter("stalled", 3)], Date.now())).rejects.toMatchObject({
          code: "EL_STORE_TIMEOUT",
        });
      }
      expect(store.breaker?.state).toBe("open");
      process.kill(server.pid as number, "SIGCONT");
      await new Promise((resolve) => setTimeout(resolve, 150));
      const [state] = await store.apply([counter("resumed", 3)], Date.now());
      expect(state?.count).toBe(1);
      expect(store.breaker?.state).toBe("closed");
    } finally {
      await store.close();
    }
  });
});
