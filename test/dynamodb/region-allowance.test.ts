import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hybridCounting } from "../../src/core/hybrid-counting.js";
import { createLimiter, type Limiter } from "../../src/limiter.js";
import { definePolicy } from "../../src/policy/load.js";
import type { ResolvedPolicy } from "../../src/policy/types.js";
import { DynamoDbStore } from "../../src/stores/dynamodb.js";
import { type DelayProxy, startDelayProxy } from "../support/delay-proxy.js";
import { burstFleet } from "../support/hybrid-fleet.js";
import {
  type CountingProxy,
  createRateLimitTable,
  type LocalDynamo,
  startCountingProxy,
  startDynalite,
  TEST_CREDENTIALS,
} from "./harness.js";

/**
 * Region allowances (the DynamoDB store's opt-in `regionAllowance`; region-allowance.ts and
 * core/hybrid/allowance.ts) on three dynalite servers as three regions, us-east-1 holding the
 * lease table. Each region reaches the others through a proxy that holds every chunk 60 ms each
 * way, so a call to another region is a round trip of 120 ms or more, and its own through a
 * proxy that counts the calls.
 */
const REGIONS = ["us-east-1", "eu-west-1", "ap-southeast-1"] as const;
type Region = (typeof REGIONS)[number];
const ONE_WAY_MS = 60;
const T0 = Date.UTC(2026, 11, 1, 12, 0, 0);

const servers = new Map<Region, LocalDynamo>();
const counting = new Map<Region, CountingProxy>();
const far = new Map<Region, DelayProxy>();
const opened: DynamoDbStore[] = [];

beforeAll(async () => {
  for (const region of REGIONS) {
    const local = await startDynalite(region);
    servers.set(region, local);
    await createRateLimitTable(local.client, "rate-limits");
    await createRateLimitTable(local.client, "rate-limit-holders");
    if (region === "us-east-1") await createRateLimitTable(local.client, "rate-limit-leases");
    const proxy = await startCountingProxy(local.endpoint);
    counting.set(region, proxy);
    far.set(region, await startDelayProxy(Number(new URL(proxy.endpoint).port), ONE_WAY_MS));
  }
});

afterAll(async () => {
  // Fills and reclaims run behind the requests, through the 120 ms proxies: let them land
  // before the servers close under them.
  await new Promise((resolve) => setTimeout(resolve, 1000));
  await Promise.all(opened.map((store) => store.close()));
  await Promise.all([...far.values()].map((proxy) => proxy.close()));
  await Promise.all([...counting.values()].map((proxy) => proxy.close()));
  await Promise.all([...servers.values()].map((local) => local.close()));
});

/** How a process in `from` reaches `to`: its own region directly, another through the delay. */
function endpointFrom(from: Region, to: Region): string {
  if (from === to) return (counting.get(to) as CountingProxy).endpoint;
  return `http://${(far.get(to) as DelayProxy).address}`;
}

function storeIn(region: Region, allowance = true): DynamoDbStore {
  const store = new DynamoDbStore({
    region,
    endpoint: endpointFrom(region, region),
    credentials: TEST_CREDENTIALS,
    globalRegions: [...REGIONS],
    leaseRegion: "us-east-1",
    leaseTable: "rate-limit-leases",
    leaseEndpoint: endpointFrom(region, "us-east-1"),
    leaseRoundTripMs: region === "us-east-1" ? 0 : 2 * ONE_WAY_MS,
    regionHolder: true,
    holderTable: "rate-limit-holders",
    ...(allowance
      ? {
          regionAllowance: true,
          regionEndpoints: Object.fromEntries(REGIONS.map((to) => [to, endpointFrom(region, to)])),
        }
      : {}),
  });
  opened.push(store);
  return store;
}

function policyWith(limit: number): ResolvedPolicy {
  return definePolicy({
    budget: "5s",
    tiers: { anonymous: { global: { limit, window: "1m", counting: "hybrid" } } },
  });
}

/** A clock at `start` when called first, moving with real time (a block cached ends). */
function movingFrom(start: number): () => number {
  const began = Date.now();
  return () => start + (Date.now() - began);
}

function limiterOn(store: DynamoDbStore, policy: ResolvedPolicy, clock: () => number): Limiter {
  return createLimiter({
    policy,
    store: hybridCounting(store),
    clock,
    onStoreError: () => {},
    overrides: false,
  });
}

/** The allowance item of `ip` in `region`'s holders table, for the window of `at`. */
async function allowanceIn(region: Region, ip: string): Promise<number | undefined> {
  const local = servers.get(region) as LocalDynamo;
  const answer = await local.client.call<{ Items: Record<string, { S?: string; N?: string }>[] }>(
    "Scan",
    { TableName: "rate-limit-holders", ConsistentRead: true },
  );
  const item = answer.Items.find(
    (found) =>
      found.PK?.S?.startsWith(`ip:${ip}|`) === true && found.SK?.S?.startsWith("allowance:"),
  );
  return item?.allowance?.N === undefined ? undefined : Number(item.allowance.N);
}

/** What `ip`'s holder in `region` has left (units the region reserved and did not spend). */
async function holderLeftIn(region: Region, ip: string): Promise<number> {
  const local = servers.get(region) as LocalDynamo;
  const answer = await local.client.call<{ Items: Record<string, { S?: string; N?: string }>[] }>(
    "Scan",
    { TableName: "rate-limit-holders", ConsistentRead: true },
  );
  const item = answer.Items.find(
    (found) => found.PK?.S?.startsWith(`ip:${ip}|`) === true && found.SK?.S?.startsWith("holder:"),
  );
  return Number(item?.left?.N ?? 0);
}

/** The lease item's attributes for `ip`: the counter's count, what it holds back, the marks. */
async function leaseOf(ip: string): Promise<Record<string, number>> {
  const local = servers.get("us-east-1") as LocalDynamo;
  const answer = await local.client.call<{ Items: Record<string, { S?: string; N?: string }>[] }>(
    "Scan",
    { TableName: "rate-limit-leases", ConsistentRead: true },
  );
  const item = answer.Items.find((found) => found.PK?.S === `ip:${ip}`) ?? {};
  return Object.fromEntries(
    Object.entries(item)
      .filter(([name, value]) => name.includes("|") && value.N !== undefined)
      .map(([name, value]) => [name.slice(name.indexOf("~") + 1 || 0), Number(value.N)]),
  );
}

async function until(check: () => Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error("timed out");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe("region allowances on three dynalite regions, 120 ms apart", () => {
  it("a subject's first request in a far region is answered in that region, without waiting for the lease region", async () => {
    const ip = "203.0.113.60";
    const store = storeIn("eu-west-1");
    const limiter = limiterOn(store, policyWith(60), () => T0);
    const euCalls = counting.get("eu-west-1") as CountingProxy;
    const before = euCalls.operations.get("UpdateItem") ?? 0;
    const verdict = await limiter.check({ ip, path: "/" });
    expect(verdict.action).toBe("allow");
    // Two writes in the region (the holder's take, which finds nothing, and the allowance, side
    // by side) and no wait for a round trip of 120 ms to us-east-1.
    expect(verdict.durationMs).toBeLessThan(2 * ONE_WAY_MS);
    expect((euCalls.operations.get("UpdateItem") ?? 0) - before).toBe(2);
    expect(await allowanceIn("eu-west-1", ip)).toBe(1);
    // Behind it the region's holder was filled from the lease item, which holds back one unit
    // for each of the two far regions from its first write.
    await until(async () => (await leaseOf(ip)).held !== undefined);
    const lease = await leaseOf(ip);
    expect(lease.held).toBe(2);
    // The next request here takes from the holder: one write in the region.
    const next = await limiter.check({ ip, path: "/" });
    expect(next.action).toBe("allow");
    expect(next.durationMs).toBeLessThan(2 * ONE_WAY_MS);
  });

  it("at the limit in the lease region, the allowances no region spent are taken back: exactly the limit admitted", async () => {
    const ip = "203.0.113.61";
    const store = storeIn("us-east-1");
    const limiter = limiterOn(store, policyWith(6), movingFrom(T0));
    const reasons: string[] = [];
    for (let i = 0; i < 4; i++) reasons.push((await limiter.check({ ip, path: "/" })).reason);
    // 6 less the 2 held back for eu-west-1 and ap-southeast-1.
    expect(reasons).toEqual(Array(4).fill("within-limit"));
    const refused = await limiter.check({ ip, path: "/" });
    expect(refused.action).not.toBe("allow");
    // Refused with a short retry (the revocations are on their way), not to the window's end.
    expect(refused.retryAfterSeconds).toBeLessThanOrEqual(1);
    await until(async () => (await leaseOf(ip)).held === 0);
    expect(await allowanceIn("eu-west-1", ip)).toBe(2);
    expect(await allowanceIn("ap-southeast-1", ip)).toBe(2);
    let admitted = 4;
    for (let i = 0; i < 6; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      if ((await limiter.check({ ip, path: "/" })).action === "allow") admitted++;
    }
    expect(admitted).toBe(6);
    // Revoked: a far region's first request now waits for the lease region, which refuses it.
    const late = await limiterOn(storeIn("eu-west-1"), policyWith(6), movingFrom(T0)).check({
      ip,
      path: "/",
    });
    expect(late.action).not.toBe("allow");
  });

  it("an allowance a far region spent stays counted when the lease region takes the rest back", async () => {
    const ip = "203.0.113.62";
    const eu = limiterOn(storeIn("eu-west-1"), policyWith(6), movingFrom(T0));
    expect((await eu.check({ ip, path: "/" })).action).toBe("allow");
    // Its region's holder is filled behind it (one unit: a share of a small limit rounds down).
    await until(async () => (await holderLeftIn("eu-west-1", ip)) > 0);
    const us = limiterOn(storeIn("us-east-1"), policyWith(6), movingFrom(T0));
    let admitted = 1;
    for (let i = 0; i < 12; i++) {
      const verdict = await us.check({ ip, path: "/" });
      if (verdict.action === "allow") admitted++;
      else await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(await allowanceIn("eu-west-1", ip)).toBe(1);
    expect(await allowanceIn("ap-southeast-1", ip)).toBe(2);
    // eu-west-1's spent allowance, what its holder was filled with behind it (held there for
    // its next requests), and the rest from the lease item, ap-southeast-1's given back.
    expect(admitted + (await holderLeftIn("eu-west-1", ip))).toBe(6);
    const lease = await leaseOf(ip);
    expect(lease.held).toBe(1);
    expect(lease["eu-west-1"]).toBe(1);
    expect(lease["ap-southeast-1"]).toBe(2);
  });

  it("concurrent bursts on fresh subjects from every region: never more than the limit in a window", async () => {
    const stores = REGIONS.flatMap((region) => [storeIn(region), storeIn(region)]);
    for (let window = 0; window < 3; window++) {
      const result = await burstFleet({
        policy: policyWith(8),
        stores,
        ip: `203.0.113.${70 + window}`,
        rounds: 4,
        perProcess: 3,
        start: T0 + 60_000 * (window + 1),
        stepMs: 200,
      });
      expect(result.sent).toBe(72);
      expect(result.admitted).toBeLessThanOrEqual(8);
      expect(result.admitted).toBeGreaterThanOrEqual(4);
    }
  });

  it("refuses regionAllowance without region holders or other regions, and regionEndpoints without it", () => {
    const base = { region: "eu-west-1", credentials: TEST_CREDENTIALS, leaseRegion: "us-east-1" };
    expect(
      () =>
        new DynamoDbStore({
          ...base,
          globalRegions: ["us-east-1", "eu-west-1"],
          regionAllowance: true,
        }),
    ).toThrow(/regionAllowance needs regionHolder: true/);
    expect(
      () =>
        new DynamoDbStore({
          ...base,
          region: "us-east-1",
          globalRegions: ["us-east-1"],
          regionHolder: true,
          regionAllowance: true,
        }),
    ).toThrow(/a region other than the lease region/);
    expect(
      () => new DynamoDbStore({ ...base, regionEndpoints: { "us-east-1": "http://127.0.0.1:1" } }),
    ).toThrow(expect.objectContaining({ code: "EL_STORE_OPTION" }));
  });
});
