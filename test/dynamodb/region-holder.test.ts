import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { definePolicy } from "../../src/policy/load.js";
import type { ResolvedPolicy } from "../../src/policy/types.js";
import { DynamoDbStore } from "../../src/stores/dynamodb.js";
import { burstFleet, readCounter } from "../support/hybrid-fleet.js";
import {
  type CountingProxy,
  createRateLimitTable,
  type LocalDynamo,
  scanTable,
  startCountingProxy,
  startDynalite,
  TEST_CREDENTIALS,
} from "./harness.js";

/**
 * Hybrid counting's region holder (core/hybrid/holder.ts) on two dynalite servers as two
 * regions, us-east-1 holding the lease table: eu-west-1's processes take their units from an
 * item in their own region's holders table, which only they write, and the holder is topped up
 * from the lease item; us-east-1's reserve on the lease item directly (it is local). Under concurrent bursts from both regions, no more than the limit is
 * admitted, and no holder was ever granted more than the lease item counted.
 */
let us: LocalDynamo;
let eu: LocalDynamo;
let usProxy: CountingProxy;
let euProxy: CountingProxy;
const opened: DynamoDbStore[] = [];
const T0 = Date.UTC(2026, 11, 1, 12, 0, 0);

beforeAll(async () => {
  [us, eu] = await Promise.all([startDynalite("us-east-1"), startDynalite("eu-west-1")]);
  await Promise.all(
    [us, eu].flatMap((local) => [
      createRateLimitTable(local.client, "rate-limits"),
      createRateLimitTable(local.client, "rate-limit-holders"),
    ]),
  );
  await createRateLimitTable(us.client, "rate-limit-leases");
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

/**
 * Three processes in each region, each with its own client; reservations in us-east-1; region
 * holders when `holders` (the store's opt-in `regionHolder`).
 */
function regionalStores(holders: boolean): DynamoDbStore[] {
  const stores = [0, 1, 2].flatMap(() =>
    [
      { region: "us-east-1", endpoint: usProxy.endpoint },
      { region: "eu-west-1", endpoint: euProxy.endpoint },
    ].map(
      ({ region, endpoint }) =>
        new DynamoDbStore({
          region,
          endpoint,
          credentials: TEST_CREDENTIALS,
          globalRegions: ["us-east-1", "eu-west-1"],
          leaseRegion: "us-east-1",
          leaseTable: "rate-limit-leases",
          leaseEndpoint: usProxy.endpoint,
          ...(holders ? { regionHolder: true, holderTable: "rate-limit-holders" } : {}),
        }),
    ),
  );
  opened.push(...stores);
  return stores;
}

function policyWith(limit: number): ResolvedPolicy {
  return definePolicy({
    budget: "5s",
    tiers: { anonymous: { global: { limit, window: "1m", counting: "hybrid" } } },
  });
}

describe("the region holder on two dynalite regions", () => {
  it("concurrent bursts from both regions: at most the limit admitted, each holder granted only what the lease item counted", async () => {
    const stores = regionalStores(true);
    const ip = "203.0.113.50";
    const result = await burstFleet({
      policy: policyWith(300),
      stores,
      ip,
      rounds: 12,
      perProcess: 8,
      start: T0,
      stepMs: 500,
    });
    await Promise.all(stores.map((store) => store.settled()));
    // Background top-ups land after the bursts: let them.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(result.sent).toBe(576);
    expect(result.admitted).toBeLessThanOrEqual(300);
    expect(result.admitted).toBeGreaterThanOrEqual(240);
    const [lease] = await (stores[0] as DynamoDbStore).apply(
      [readCounter(policyWith(300), `ip:${ip}`)],
      T0 + 10_000,
    );
    const holders = await Promise.all(
      [us, eu].map(async (local) =>
        (await scanTable(local.client, "rate-limit-holders")).filter((item) =>
          item.PK.startsWith(`ip:${ip}|`),
        ),
      ),
    );
    const granted = await Promise.all(
      [us, eu].map(async (local) => {
        const answer = await local.client.call<{
          Items: Record<string, { S?: string; N?: string }>[];
        }>("Scan", { TableName: "rate-limit-holders", ConsistentRead: true });
        return answer.Items.filter((item) => item.PK?.S?.startsWith(`ip:${ip}|`)).map((item) => ({
          region: item.SK?.S?.split("#").pop(),
          granted: Number(item.granted?.N ?? 0),
          left: Number(item.left?.N ?? 0),
        }));
      }),
    );
    // The far region's holder is in its own region, written by it alone; the lease region has
    // none: its processes reserve on the lease item, one local round trip away.
    expect(holders.map((items) => items.length)).toEqual([0, 1]);
    expect(granted[1]?.[0]?.region).toBe("eu-west-1");
    const total = granted.flat().reduce((sum, holder) => sum + holder.granted, 0);
    expect(total).toBeGreaterThan(0);
    // Every unit a holder was granted was counted in the lease item first, within the limit.
    expect(total).toBeLessThanOrEqual(Math.min(300, lease?.count ?? 0));
    for (const holder of granted.flat()) {
      expect(holder.left).toBeGreaterThanOrEqual(0);
      expect(holder.left).toBeLessThanOrEqual(holder.granted);
    }
    // A take that finds the holder short reads nothing: without the item (dynalite does not
    // return it with a failed condition; nor does DynamoDB when there is none yet) the request
    // goes on to the lease item, and a read would only add a round trip to that wait.
    expect(euProxy.operations.get("GetItem") ?? 0).toBe(0);
  });

  it("holders are opt-in: without regionHolder no holder item is written and the limit holds", async () => {
    const stores = regionalStores(false);
    const ip = "203.0.113.51";
    const result = await burstFleet({
      policy: policyWith(100),
      stores,
      ip,
      rounds: 4,
      perProcess: 8,
      start: T0 + 60_000,
      stepMs: 500,
    });
    await Promise.all(stores.map((store) => store.settled()));
    expect(result.admitted).toBeLessThanOrEqual(100);
    // No holder item in any table of either region (a holder's sort key starts "holder:").
    const holders = await Promise.all(
      [us, eu].flatMap((local) =>
        ["rate-limits", "rate-limit-holders"].map(async (table) =>
          (await scanTable(local.client, table)).filter(
            (item) => item.PK.startsWith(`ip:${ip}|`) && item.SK.startsWith("holder:"),
          ),
        ),
      ),
    );
    expect(holders.map((items) => items.length)).toEqual([0, 0, 0, 0]);
  });

  it("a holders table without regionHolder is refused as a store option", () => {
    expect(
      () =>
        new DynamoDbStore({
          region: "eu-west-1",
          credentials: TEST_CREDENTIALS,
          leaseRegion: "us-east-1",
          holderTable: "rate-limit-holders",
        }),
    ).toThrow(expect.objectContaining({ code: "EL_STORE_OPTION" }));
  });
});
