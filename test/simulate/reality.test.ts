/**
 * The simulator against reality: the same small scenario (one region, exact counting) decided
 * by the real limiter, sequentially, on the scenario's clock, through a real redis-server and
 * through dynalite (the DynamoDB protocol over HTTP), must admit what the simulation admitted,
 * per subject and window.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Store } from "../../src/core/types.js";
import { createLimiter } from "../../src/limiter.js";
import { loadPolicy } from "../../src/policy/load.js";
import { arrivalsOf, simulate, simulatedPolicy } from "../../src/simulate/run.js";
import type { Scenario } from "../../src/simulate/scenario.js";
import { dynamodbStore } from "../../src/stores/dynamodb.js";
import { redisStore } from "../../src/stores/redis.js";
import {
  createRateLimitTable,
  type LocalDynamo,
  startDynalite,
  TEST_CREDENTIALS,
} from "../dynamodb/harness.js";
import { type RedisServer, startRedis } from "../redis/redis-server.js";
import { fixtureScenario } from "./helpers.js";

let scenario: Scenario;
let simulated: Map<string, number>;
let redis: { server: RedisServer; cleanup: () => Promise<void> } | undefined;
let dynamo: LocalDynamo | undefined;

const windowOf = (epochMs: number) => Math.floor(epochMs / 60_000);

beforeAll(async () => {
  scenario = fixtureScenario("reality.yaml");
  simulated = new Map();
  await simulate(scenario, {
    onDecision: (_mode, _arrival, decision, epochAt) => {
      if (decision.action !== "allow") return;
      const key = `${decision.subject} ${windowOf(epochAt)}`;
      simulated.set(key, (simulated.get(key) ?? 0) + 1);
    },
  });
  redis = await startRedis();
  dynamo = await startDynalite();
  await createRateLimitTable(dynamo.client, "rate-limits");
}, 60_000);

afterAll(async () => {
  await redis?.cleanup();
  await dynamo?.close();
});

/** The scenario's requests through the real limiter and `store`, one at a time, on its clock. */
async function admittedBy(store: Store): Promise<Map<string, number>> {
  let now = 0;
  const limiter = createLimiter({
    policy: simulatedPolicy(loadPolicy(scenario.policyPath)),
    store,
    clock: () => now,
    onStoreError: (error) => {
      throw error;
    },
  });
  const admitted = new Map<string, number>();
  for (const { at, arrival } of await arrivalsOf(scenario)) {
    now = at;
    const verdict = await limiter.check(arrival.request);
    expect(verdict.reason).not.toMatch(/^store-failed/);
    if (verdict.action !== "allow") continue;
    const key = `${verdict.subject} ${windowOf(at)}`;
    admitted.set(key, (admitted.get(key) ?? 0) + 1);
  }
  return admitted;
}

const sorted = (map: Map<string, number>) =>
  [...map.entries()].sort((a, b) => (a[0] < b[0] ? -1 : 1));

describe("the simulator against real stores", () => {
  it("admits per subject and window what a real redis-server admits", async () => {
    const store = redisStore({
      client: (redis as { server: RedisServer }).server.url,
      clock: "caller",
    });
    try {
      await store.ready();
      const real = await admittedBy(store);
      expect(real.size).toBeGreaterThan(30);
      expect(sorted(real)).toEqual(sorted(simulated));
    } finally {
      await store.close();
    }
  }, 120_000);

  it("admits per subject and window what dynalite admits", async () => {
    const store = dynamodbStore({
      region: "us-east-1",
      endpoint: (dynamo as LocalDynamo).endpoint,
      credentials: TEST_CREDENTIALS,
    });
    try {
      expect(sorted(await admittedBy(store))).toEqual(sorted(simulated));
    } finally {
      await store.close();
    }
  }, 120_000);
});
