import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Duration } from "../../src/policy/input-types.js";
import { definePolicy } from "../../src/policy/load.js";
import { type Fleets, redisFleets } from "../support/region-fleets.js";
import { describeTraffic, runTraffic } from "../support/region-traffic.js";
import { type FarRedis, startFarRedis } from "../support/regions.js";

/**
 * One redis-server, the primary, beside two gateways ("near") and 100 ms each way from two
 * others ("far", through a delay proxy), a spread attack over all four through the library,
 * hybrid counting. Limit 20 per 2 s, two windows.
 */
const DELAY_MS = 100;
const LIMIT = 20;
const WINDOW_MS = 2000;

let redis: FarRedis;
const opened: Fleets[] = [];

beforeAll(async () => {
  redis = await startFarRedis(DELAY_MS);
});

afterAll(async () => {
  await Promise.all(opened.map((fleets) => fleets.close()));
  await redis?.close();
});

async function hybridFleets(budget: Duration): Promise<Fleets> {
  const policy = definePolicy({
    budget,
    tiers: { anonymous: { global: { limit: LIMIT, window: "2s", counting: "hybrid" } } },
  });
  const fleets = redisFleets(redis, { policy, perRegion: 2 });
  opened.push(fleets);
  await fleets.warm();
  return fleets;
}

async function attack(fleets: Fleets, ip: string) {
  // Just after a window has begun, so that the run covers whole windows.
  await new Promise((resolve) => setTimeout(resolve, WINDOW_MS - (Date.now() % WINDOW_MS) + 20));
  return runTraffic({
    fleets: fleets.fleets,
    durationMs: 2 * WINDOW_MS - 100,
    windowMs: WINDOW_MS,
    attack: { ip, perSecond: 100 },
  });
}

describe("a Redis primary far from one region's gateways, a spread attack with hybrid counting", () => {
  it("never admits beyond the limit in a window, with a budget that covers the far round trips", async () => {
    // A request may wait for two reservations in flight, then send its own: three round trips.
    const result = await attack(await hybridFleets("700ms"), "203.0.113.20");
    console.log(describeTraffic("hybrid, Redis 200 ms away, budget 700 ms", result));
    const windows = [...result.attack.admittedByWindow.values()];
    for (const admitted of windows) expect(admitted).toBeLessThanOrEqual(LIMIT);
    expect(windows.reduce((sum, n) => sum + n, 0)).toBeGreaterThanOrEqual(LIMIT);
  });

  it("never admits beyond the limit when the far gateways' budget covers one round trip, not the waits", async () => {
    const result = await attack(await hybridFleets("250ms"), "203.0.113.21");
    console.log(describeTraffic("hybrid, Redis 200 ms away, budget 250 ms", result));
    expect(result.attack.reasons.get("store-failed-local") ?? 0).toBeGreaterThan(0);
    for (const admitted of result.attack.admittedByWindow.values()) {
      expect(admitted).toBeLessThanOrEqual(LIMIT);
    }
  });
});
