/**
 * The ways a Redis can fail without ever saying so, each with a bounded cost per decision:
 *
 * - a listener that accepts TCP and never answers (a proxy that lost its backend): the first
 *   connection never becomes ready. The first decisions wait at most the connection's bound,
 *   every decision after the store has seen that failure at most the budget (plus timer slack
 *   on a machine shared by other suites), the breaker opens, 200 concurrent decisions finish
 *   within a second, and once the listener reaches a real redis-server, counting returns to it;
 * - a half-open socket after a failover: the connection was ready, then carries nothing and is
 *   never reset. Decisions stay within the budget, the breaker opens, its PING probe finds the
 *   socket dead and the store connects again, to the new server.
 */
import { Redis } from "ioredis";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import type { Limiter } from "../../src/limiter.js";
import { redisStoreFromUrl } from "../../src/stores/redis.js";
import { lagMonitor } from "../support/loop-lag.js";
import {
  EXAMPLE_BUDGET_MS,
  exampleLimiter,
  timedCheck,
  timedConcurrentChecks,
} from "../support/store-failure.js";
import { type Switchboard, startSwitchboard } from "../support/switchboard.js";
import { startRedis } from "./redis-server.js";

/** Timers on a machine shared by several suites fire late; the budget is what is checked. */
const SLACK_MS = 100;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const cleanups: (() => Promise<unknown>)[] = [];
const lag = lagMonitor();
afterAll(() => lag.stop());

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

const timed = (limiter: Limiter, ip: string, path?: string) => timedCheck(lag, limiter, ip, path);

async function waitFor(predicate: () => Promise<boolean> | boolean, ms: number): Promise<number> {
  const started = performance.now();
  while (!(await predicate())) {
    if (performance.now() - started > ms) throw new Error(`not within ${ms} ms`);
    await sleep(10);
  }
  return performance.now() - started;
}

describe("a Redis that accepts and never answers", () => {
  let board: Switchboard;

  it("costs a bounded time per decision, opens the breaker, and counts again once a server answers", async () => {
    board = await startSwitchboard();
    cleanups.push(() => board.close());
    const store = redisStoreFromUrl(`redis://127.0.0.1:${board.port}`);
    cleanups.push(() => store.close());
    const limiter = exampleLimiter(store);

    // The first decision waits for the first connection, at most its bound (1 s by default).
    const first = await timed(limiter, "10.30.0.1");
    expect(first.reason).toBe("store-failed-local");
    expect(first.ms).toBeLessThan(1000 + EXAMPLE_BUDGET_MS + SLACK_MS);
    expect(store.status().failures).toBeGreaterThan(0);

    // From then on no decision waits for the connection: within the budget, until the breaker
    // opens after a few, and then at once.
    const after: { ms: number; reason: string }[] = [];
    for (let i = 0; i < 20; i++) after.push(await timed(limiter, `10.30.1.${i}`));
    expect(after.every((decision) => decision.reason === "store-failed-local")).toBe(true);
    expect(Math.max(...after.map((decision) => decision.ms))).toBeLessThan(
      EXAMPLE_BUDGET_MS + SLACK_MS,
    );
    expect(store.breaker?.state).toBe("open");
    expect(store.status()).toMatchObject({ state: "open", openParts: ["redis"] });

    const admin = await timed(limiter, "10.30.2.1", "/api/admin/users");
    expect(admin).toMatchObject({ status: 503, reason: "store-failed-closed" });

    // 200 at once: all answered within a second, beyond the time we could not run.
    const burst = await timedConcurrentChecks(lag, limiter, "10.30.3", 200);
    expect(burst.ms).toBeLessThan(1000);
    expect(burst.reasons).toEqual(new Set(["store-failed-local"]));

    // A connection that never became ready is dropped and made again: the listener sees new
    // ones (a few, not one per decision).
    await waitFor(() => board.accepted >= 2, 3000);
    expect(board.accepted).toBeLessThan(20);

    // The listener finds its backend: the next connection reaches a real redis-server, and
    // decisions count in it again.
    const redis = await startRedis();
    cleanups.push(redis.cleanup);
    board.forwardTo(redis.server.port);
    // A fresh address each time: one address would have its own local count used up.
    let probe = 0;
    const resumedIn = await waitFor(
      async () => (await timed(limiter, `10.30.4.${probe++ & 255}`)).reason === "within-limit",
      5000,
    );
    // A stalled connection is given up after 1 s, the next one is ready at once, and the
    // breaker lets a probe through within its 250 ms cooldown.
    expect(resumedIn).toBeLessThan(2500);
    expect(store.status().state).toBe("ok");
  }, 30_000);
});

describe("a half-open socket after a failover", () => {
  it("stays within the budget, and reconnects to the new server when the breaker's PING gets no answer", async () => {
    const [first, second] = await Promise.all([startRedis(), startRedis()]);
    cleanups.push(first.cleanup, second.cleanup);
    const board = await startSwitchboard();
    cleanups.push(() => board.close());
    board.forwardTo(first.server.port);
    const store = redisStoreFromUrl(`redis://127.0.0.1:${board.port}`);
    cleanups.push(() => store.close());
    await store.ready();
    const limiter = exampleLimiter(store);
    expect((await timed(limiter, "10.31.0.1")).reason).toBe("within-limit");

    // The failover: the old connection goes silent without a reset; new ones reach the new
    // primary.
    board.freeze();
    board.forwardTo(second.server.port);
    const failedOverAt = performance.now();
    const decisions: { ms: number; reason: string }[] = [];
    let resumedAt: number | undefined;
    for (let i = 0; resumedAt === undefined && performance.now() - failedOverAt < 8000; i++) {
      const decision = await timed(limiter, `10.31.1.${i & 255}`);
      decisions.push(decision);
      if (decision.reason === "within-limit") resumedAt = performance.now();
      await sleep(5);
    }
    expect(decisions.some((decision) => decision.reason === "store-failed-local")).toBe(true);
    expect(Math.max(...decisions.map((decision) => decision.ms))).toBeLessThan(
      EXAMPLE_BUDGET_MS + SLACK_MS,
    );
    expect(store.breaker?.opened).toBeGreaterThanOrEqual(1);
    // Calls time out after 1 s and open the breaker; its first probe's PING times out after
    // another second and the store connects again.
    expect(resumedAt).toBeDefined();
    expect((resumedAt as number) - failedOverAt).toBeLessThan(4000);
    // Counted in the new primary.
    const direct = new Redis({ port: second.server.port, host: "127.0.0.1" });
    cleanups.push(async () => direct.disconnect());
    expect((await direct.keys("el:*")).some((key) => key.includes("ip:10.31.1."))).toBe(true);
  }, 30_000);
});
