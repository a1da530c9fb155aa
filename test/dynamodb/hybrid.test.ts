import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CounterSpec } from "../../src/core/types.js";
import type { WindowDuration } from "../../src/policy/input-types.js";
import { definePolicy } from "../../src/policy/load.js";
import type { ResolvedPolicy } from "../../src/policy/types.js";
import { DynamoDbStore } from "../../src/stores/dynamodb.js";
import { burstFleet, readCounter } from "../support/hybrid-fleet.js";
import {
  type CountingProxy,
  createRateLimitTable,
  type LocalDynamo,
  startCountingProxy,
  startDynalite,
  TEST_CREDENTIALS,
} from "./harness.js";

/**
 * Two regions of a global table, each a dynalite server of its own, with no replication
 * between them at all (the worst lag there is): counting that relies on replicated sums admits
 * up to the limit in each region, counting that reserves in one region never over-admits.
 */
let us: LocalDynamo;
let eu: LocalDynamo;
let usProxy: CountingProxy;
let euProxy: CountingProxy;
const opened: DynamoDbStore[] = [];
const REGIONS = ["us-east-1", "eu-west-1"];
const T0 = Date.UTC(2026, 11, 1, 11, 0, 0);

beforeAll(async () => {
  [us, eu] = await Promise.all([startDynalite("us-east-1"), startDynalite("eu-west-1")]);
  await Promise.all([
    createRateLimitTable(us.client, "rate-limits"),
    createRateLimitTable(eu.client, "rate-limits"),
  ]);
  [usProxy, euProxy] = await Promise.all([
    startCountingProxy(us.endpoint),
    startCountingProxy(eu.endpoint),
  ]);
});

afterAll(async () => {
  await Promise.all(opened.map((store) => store.close()));
  await Promise.all([usProxy?.close(), euProxy?.close()]);
  await Promise.all([us?.close(), eu?.close()]);
});

/** Two processes in each region, each with its own client. */
function regionalStores(): DynamoDbStore[] {
  const stores = [0, 1].flatMap(() => [
    new DynamoDbStore({
      region: "us-east-1",
      endpoint: usProxy.endpoint,
      credentials: TEST_CREDENTIALS,
      globalRegions: REGIONS,
    }),
    new DynamoDbStore({
      region: "eu-west-1",
      endpoint: euProxy.endpoint,
      credentials: TEST_CREDENTIALS,
      globalRegions: REGIONS,
      // Reservations go to the first region of the global table (the default lease region).
      leaseEndpoint: usProxy.endpoint,
    }),
  ]);
  opened.push(...stores);
  return stores;
}

function policyWith(
  counting: "exact" | "hybrid",
  limit: number,
  window: WindowDuration = "1h",
): ResolvedPolicy {
  return definePolicy({
    budget: "5s",
    tiers: { anonymous: { global: { limit, window, counting } } },
  });
}

function updates(): number {
  return (usProxy.operations.get("UpdateItem") ?? 0) + (euProxy.operations.get("UpdateItem") ?? 0);
}

describe("hybrid counting on dynalite, two regions that never replicate", () => {
  it("exact per-region items admit the limit in each region; hybrid never over-admits", async () => {
    const stores = regionalStores();
    const run = (counting: "exact" | "hybrid", ip: string) =>
      burstFleet({
        policy: policyWith(counting, 400),
        stores,
        ip,
        rounds: 10,
        perProcess: 60,
        start: T0,
        stepMs: 1000,
      });
    const exact = await run("exact", "203.0.113.30");
    const hybrid = await run("hybrid", "203.0.113.31");
    expect(exact.sent).toBe(2400);
    // Each region admits 400 on its own items: what a replication lag lets through, at worst.
    expect(exact.admitted).toBe(800);
    expect(hybrid.admitted).toBeLessThanOrEqual(400);
    expect(hybrid.admitted).toBeGreaterThanOrEqual(360);
    // Every admitted request was reserved in the lease region's items first.
    const usStore = stores[0] as DynamoDbStore;
    const counter: CounterSpec = readCounter(policyWith("hybrid", 400), "ip:203.0.113.31");
    const [state] = await usStore.apply([counter], T0 + 10_000);
    expect(state?.count).toBeGreaterThanOrEqual(hybrid.admitted);
  });

  it("steady traffic from both regions under the limit: under 0.05 writes a request, where exact writes one per admission", async () => {
    const stores = regionalStores();
    const run = async (counting: "exact" | "hybrid", ip: string) => {
      const before = updates();
      const result = await burstFleet({
        policy: policyWith(counting, 3000, "1m"),
        stores,
        ip,
        // Four requests every 119 ms: 2,000 in the minute, two thirds of the limit.
        rounds: 500,
        perProcess: 1,
        start: T0 + 3_600_000,
        stepMs: 119,
      });
      await Promise.all(stores.map((store) => store.settled()));
      return { ...result, writes: updates() - before };
    };
    const exact = await run("exact", "198.51.100.40");
    const hybrid = await run("hybrid", "198.51.100.41");
    expect(exact.sent).toBe(2000);
    expect(exact.admitted).toBe(2000);
    expect(exact.writes).toBeGreaterThanOrEqual(exact.admitted);
    // Under its limit: every request admitted, as exact counting does.
    expect(hybrid.admitted).toBe(2000);
    expect(hybrid.writes / hybrid.sent).toBeLessThan(0.05);
  });
});
