/**
 * Overrides on DynamoDB Global Tables: two dynalite regions with the replicator double (each
 * item copied whole, last writer wins per item, in no order across items). An override set in
 * one region applies in the other within the refresh plus the replication lag; and a region
 * that sees the new version before the shard it announces reads the shard again once it arrives.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OverrideWatch } from "../../src/core/override-watch.js";
import { createLimiter, type Limiter } from "../../src/limiter.js";
import { definePolicy } from "../../src/policy/load.js";
import {
  DynamoDbOverrides,
  GLOBAL_TABLES_SETTLE_MS,
  OVERRIDES_PK,
  shardOf,
} from "../../src/stores/dynamodb/overrides.js";
import { DynamoDbStore } from "../../src/stores/dynamodb.js";
import { fieldOf } from "../../src/stores/memory-overrides.js";
import { Replicator } from "../support/replicator.js";
import { within } from "../support/within.js";
import {
  createRateLimitTable,
  type LocalDynamo,
  startDynalite,
  TEST_CREDENTIALS,
} from "./harness.js";

const REGIONS = ["us-east-1", "eu-west-1"];
let us: LocalDynamo;
let eu: LocalDynamo;
const stores: DynamoDbStore[] = [];
const limiters: Limiter[] = [];

beforeAll(async () => {
  [us, eu] = await Promise.all([startDynalite("us-east-1"), startDynalite("eu-west-1")]);
});

afterAll(async () => {
  for (const limiter of limiters) limiter.close();
  for (const store of stores) await store.close();
  await Promise.all([us, eu].map((server) => server?.close()));
});

describe("overrides on Global Tables (two dynalite regions, last writer wins per item)", () => {
  it("a block set in one region refuses there at once and in the other within the refresh and the lag; remove lifts it", async () => {
    const table = "global-overrides";
    await Promise.all([us, eu].map((server) => createRateLimitTable(server.client, table)));
    const replicator = new Replicator(table, [us.client, eu.client], 200);
    try {
      const policy = definePolicy({
        identity: { user: { trustedHeader: { user: "x-user", from: "any" } } },
        tiers: { authenticated: { global: { limit: 100, window: "10m" } } },
      });
      const [here, there] = [us, eu].map((server) => {
        const store = new DynamoDbStore({
          table,
          region: server.client.region,
          endpoint: server.endpoint,
          credentials: TEST_CREDENTIALS,
          globalRegions: REGIONS,
        });
        stores.push(store);
        // A short refresh: the bound here is the replication's, plus the refresh.
        const limiter = createLimiter({
          policy,
          store,
          onStoreError: false,
          overrides: { refreshMs: 500 },
        });
        limiters.push(limiter);
        return limiter;
      }) as [Limiter, Limiter];
      const request = { ip: "203.0.113.9", path: "/", headers: { "x-user": "u_leak" } };
      expect((await there.check(request)).action).toBe("allow");
      await here.overrides.set({ subject: "user:u_leak", block: true, note: "ops" });
      expect((await here.check(request)).reason).toBe("override-block");
      await within(
        async () => (await there.check(request)).reason === "override-block",
        "the block in eu-west-1",
      );
      await here.overrides.remove({ subject: "user:u_leak" });
      await within(
        async () => (await there.check(request)).reason !== "override-block",
        "the removal in eu-west-1",
      );
    } finally {
      await replicator.halt();
    }
  }, 20_000);

  it("a region that sees the new version before the shard reads the shard again once it arrives", async () => {
    const table = "version-first";
    await Promise.all([us, eu].map((server) => createRateLimitTable(server.client, table)));
    const writer = new DynamoDbOverrides(us.client, table);
    const reader = new DynamoDbOverrides(eu.client, table, {
      settleMs: GLOBAL_TABLES_SETTLE_MS,
    });
    const watch = new OverrideWatch(reader, { refreshMs: 600_000, onChange: () => {} });
    await watch.refresh();
    const now = Date.now();
    await writer.put(
      { subject: "user:u_a", scope: "all", effect: "block", setAt: now },
      now,
      10_000,
    );
    /** Copies one item from us-east-1 to eu-west-1, as replication does, one item at a time. */
    const replicate = async (sk: string) => {
      const { Item } = await us.client.call<{ Item: object }>("GetItem", {
        TableName: table,
        Key: { PK: { S: OVERRIDES_PK }, SK: { S: sk } },
        ConsistentRead: true,
      });
      await eu.client.call("PutItem", { TableName: table, Item });
    };
    await replicate("version");
    await watch.refresh();
    expect(watch.table.all).toEqual([]);
    await replicate(shardOf(fieldOf("user:u_a", "all")));
    await watch.refresh();
    expect(watch.table.all.map((held) => held.subject)).toEqual(["user:u_a"]);
    watch.close();
  });
});
