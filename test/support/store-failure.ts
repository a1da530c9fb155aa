/**
 * What the tests of a failing store share: the example policy's limiter on a store, a decision
 * timed beyond this process's own lag, and Express with edgelimit/node in front of a limiter.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import express from "express";
import { nodeRateLimit } from "../../src/adapters/node.js";
import type { Store } from "../../src/core/types.js";
import { createLimiter, type Limiter } from "../../src/limiter.js";
import { loadPolicy } from "../../src/policy/load.js";
import { CLOUDFRONT_POLICY } from "./burst.js";
import type { LagMonitor } from "./loop-lag.js";

/** The example policy's decision budget (it sets none: the default). */
export const EXAMPLE_BUDGET_MS = 50;

/**
 * examples/policies/cloudfront.yaml (or `file`, a variant of it) on `store`, quiet about store
 * failures.
 */
export function exampleLimiter(store: Store, file = CLOUDFRONT_POLICY): Limiter {
  const policy = loadPolicy(file);
  if (policy.budgetMs !== EXAMPLE_BUDGET_MS) {
    throw new Error(
      `the example policy's budget is ${policy.budgetMs} ms, not ${EXAMPLE_BUDGET_MS}`,
    );
  }
  return createLimiter({
    policy,
    store,
    env: { EDGELIMIT_JWT_SECRET: "store-failure-test-secret-0123456789abcdef" },
    onStoreError: false,
    // Decisions only: a background read of the overrides would take the fresh instance's first
    // connection (or its slow first answer) that these tests time a decision on.
    overrides: false,
  });
}

/**
 * Decides one request: how long it took beyond the time this process could not run (see
 * loop-lag.ts), and why it came out so.
 */
export async function timedCheck(
  lag: LagMonitor,
  limiter: Limiter,
  ip: string,
  path = "/api/items",
): Promise<{ ms: number; reason: string; status: number }> {
  const { value, ms, lagMs } = await lag.measure(() =>
    limiter.check({ ip, path, method: "GET", headers: {} }),
  );
  return { ms: ms - lagMs, reason: value.reason, status: value.status };
}

/**
 * `count` decisions at once, each from an address of its own (`prefix` and a number): how long
 * they took together beyond the time this process could not run, and their reasons.
 */
export async function timedConcurrentChecks(
  lag: LagMonitor,
  limiter: Limiter,
  prefix: string,
  count: number,
): Promise<{ ms: number; reasons: Set<string> }> {
  const { value, ms, lagMs } = await lag.measure(() =>
    Promise.all(
      Array.from({ length: count }, (_, i) =>
        limiter.check({ ip: `${prefix}.${i}`, path: "/api/items", method: "GET", headers: {} }),
      ),
    ),
  );
  return { ms: ms - lagMs, reasons: new Set(value.map((verdict) => verdict.reason)) };
}

/**
 * Express with edgelimit/node on 127.0.0.1 (a free port): the server, its limiter and a test's
 * client share this process's event loop, as in an application.
 */
export async function listenExpress(
  limiter: Limiter,
): Promise<{ base: string; close(): Promise<void> }> {
  const app = express();
  app.use(nodeRateLimit({ limiter }));
  app.get("/{*path}", (_request, response) => {
    response.json({ ok: true });
  });
  const server: Server = createServer(app);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
