/**
 * DynamoDB endpoints that fail without saying so, each with a bounded cost per decision:
 *
 * - a TLS endpoint that accepts TCP and never answers the handshake: a new socket is given up
 *   after the connection bound (1 s), the first decisions wait at most that, every decision
 *   after the store has seen the failure at most the budget (plus timer slack on a machine
 *   shared by other suites), the breaker opens, 200 concurrent decisions finish within a
 *   second, and the stalled sockets are closed, never more than the pool holds;
 * - an endpoint that accepts and never answers a request: decisions stay within the budget,
 *   the breaker opens once calls time out, and counting returns once the endpoint answers.
 */
import { afterAll, afterEach, describe, expect, it } from "vitest";
import type { Limiter } from "../../src/limiter.js";
import { dynamodbStore } from "../../src/stores/dynamodb.js";
import { lagMonitor } from "../support/loop-lag.js";
import {
  EXAMPLE_BUDGET_MS,
  exampleLimiter,
  timedCheck,
  timedConcurrentChecks,
} from "../support/store-failure.js";
import { startSwitchboard } from "../support/switchboard.js";
import { createRateLimitTable, startDynalite, TEST_CREDENTIALS } from "./harness.js";

const SLACK_MS = 100;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const cleanups: (() => Promise<unknown>)[] = [];
const lag = lagMonitor();
afterAll(() => lag.stop());

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

const timed = (limiter: Limiter, ip: string, path?: string) => timedCheck(lag, limiter, ip, path);

describe("a TLS endpoint that never answers its handshake", () => {
  it("costs a bounded time per decision, opens the breaker and closes the stalled sockets", async () => {
    const board = await startSwitchboard();
    cleanups.push(() => board.close());
    const store = dynamodbStore({
      region: "us-east-1",
      endpoint: `https://127.0.0.1:${board.port}`,
      credentials: TEST_CREDENTIALS,
    });
    cleanups.push(() => store.close());
    const limiter = exampleLimiter(store);

    const first = await timed(limiter, "10.40.0.1");
    expect(first.reason).toBe("store-failed-local");
    expect(first.ms).toBeLessThan(1000 + EXAMPLE_BUDGET_MS + SLACK_MS);
    // The socket's own bound ends it moments after the decision gave up on it.
    const seen = performance.now();
    while (store.status().failures === 0 && performance.now() - seen < 1000) await sleep(5);
    expect(store.status().failures).toBeGreaterThan(0);

    const after: { ms: number; reason: string }[] = [];
    while (store.status().state !== "open" && after.length < 200) {
      after.push(await timed(limiter, `10.40.1.${after.length & 255}`));
    }
    expect(store.status()).toMatchObject({ state: "open" });
    expect(after.every((decision) => decision.reason === "store-failed-local")).toBe(true);
    expect(Math.max(...after.map((decision) => decision.ms))).toBeLessThan(
      EXAMPLE_BUDGET_MS + SLACK_MS,
    );

    const admin = await timed(limiter, "10.40.2.1", "/api/admin/users");
    expect(admin).toMatchObject({ status: 503, reason: "store-failed-closed" });

    // 200 at once: all answered within a second, beyond the time we could not run.
    const burst = await timedConcurrentChecks(lag, limiter, "10.40.3", 200);
    expect(burst.ms).toBeLessThan(1000);
    expect(burst.reasons).toEqual(new Set(["store-failed-local"]));

    // Every stalled handshake is given up after its bound: none is left open for ever, and the
    // pool never held more than its sockets.
    expect(board.accepted).toBeLessThanOrEqual(64 + 8);
    const closing = performance.now();
    while (board.open > 0 && performance.now() - closing < 3000) await sleep(20);
    expect(board.open).toBe(0);
  }, 30_000);
});

describe("an endpoint that accepts requests and never answers", () => {
  it("stays within the budget, opens the breaker, and counts again once the endpoint answers", async () => {
    const dynamo = await startDynalite();
    cleanups.push(() => dynamo.close());
    await createRateLimitTable(dynamo.client, "rate-limits");
    const board = await startSwitchboard();
    cleanups.push(() => board.close());
    const store = dynamodbStore({
      region: "us-east-1",
      endpoint: `http://127.0.0.1:${board.port}`,
      credentials: TEST_CREDENTIALS,
    });
    cleanups.push(() => store.close());
    const limiter = exampleLimiter(store);

    const decisions: { ms: number; reason: string }[] = [];
    const started = performance.now();
    // Calls time out after the store's request timeout (3 s), and the breaker opens.
    while (store.status().state !== "open" && performance.now() - started < 8000) {
      decisions.push(await timed(limiter, `10.41.0.${decisions.length & 255}`));
      await sleep(20);
    }
    expect(store.status().state).toBe("open");
    expect(decisions.every((decision) => decision.reason === "store-failed-local")).toBe(true);
    // The very first may wait for its socket's TCP handshake; none waits for an answer.
    expect(Math.max(...decisions.slice(1).map((decision) => decision.ms))).toBeLessThan(
      EXAMPLE_BUDGET_MS + SLACK_MS,
    );

    board.forwardTo(Number(new URL(dynamo.endpoint).port));
    const forwardedAt = performance.now();
    let probe = 0;
    let resumed: number | undefined;
    while (resumed === undefined && performance.now() - forwardedAt < 5000) {
      const decision = await timed(limiter, `10.41.1.${probe++ & 255}`);
      if (decision.reason === "within-limit") resumed = performance.now() - forwardedAt;
      else await sleep(20);
    }
    // The next probe after the breaker's cooldown goes out on a new socket to the endpoint.
    expect(resumed).toBeDefined();
    expect(resumed as number).toBeLessThan(1500);
  }, 30_000);
});
