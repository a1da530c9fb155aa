import { describe, expect, it } from "vitest";
import { DEFAULT_REPLICA_REGIONS } from "../../infra/stack.js";
import { bundledStoreOptions } from "../../src/adapters/lambda-edge/bundled.js";
import {
  LAMBDA_EDGE_REGIONS,
  nearestReplica,
  roundTripMs,
} from "../../src/adapters/lambda-edge/regions.js";

/** The table region plus its replicas, as infra/app.ts bundles them. */
const exampleStackRegions = ["us-east-1", ...DEFAULT_REPLICA_REGIONS];
/** The replica set of the README's quick start. */
const quickStartRegions = ["us-east-1", "eu-west-1", "ap-southeast-1", "sa-east-1"];

describe("the Lambda@Edge regions and their round trips", () => {
  it("lists the 13 regions with a regional edge cache", () => {
    expect(LAMBDA_EDGE_REGIONS).toHaveLength(13);
    expect(new Set(LAMBDA_EDGE_REGIONS).size).toBe(13);
  });

  it("knows the round trip between every pair of them, the same both ways, 0 within a region", () => {
    for (const from of LAMBDA_EDGE_REGIONS) {
      for (const to of LAMBDA_EDGE_REGIONS) {
        const distance = roundTripMs(from, to);
        if (from === to) expect(distance).toBe(0);
        else {
          expect(distance, `${from} -> ${to}`).toBeGreaterThan(0);
          expect(distance, `${from} -> ${to}`).toBeLessThan(400);
          expect(roundTripMs(to, from)).toBe(distance);
        }
      }
    }
    expect(roundTripMs("us-east-1", "mars-north-1")).toBeUndefined();
  });

  for (const [name, replicas] of [
    ["the example stack's replicas", exampleStackRegions],
    ["the quick start's replicas", quickStartRegions],
  ] as const) {
    it(`chooses the nearest of ${name} from each of the 13 regions, its own when it has one`, () => {
      for (const region of LAMBDA_EDGE_REGIONS) {
        const chosen = nearestReplica(region, replicas);
        expect(chosen, region).toBeDefined();
        expect(replicas).toContain(chosen?.region);
        expect(chosen?.roundTripMs).toBe(roundTripMs(region, chosen?.region as string));
        const shortest = Math.min(
          ...replicas.map((replica) => roundTripMs(region, replica) as number),
        );
        expect(chosen?.roundTripMs, region).toBe(shortest);
        if (replicas.includes(region)) expect(chosen).toEqual({ region, roundTripMs: 0 });
      }
    });
  }

  it("no longer sends Frankfurt, Tokyo and Sydney to us-east-1", () => {
    expect(nearestReplica("eu-central-1", quickStartRegions)?.region).toBe("eu-west-1");
    expect(nearestReplica("ap-northeast-1", quickStartRegions)?.region).toBe("ap-southeast-1");
    expect(nearestReplica("ap-southeast-2", quickStartRegions)?.region).toBe("ap-southeast-1");
  });

  it("ignores replicas it has no figure for, and answers undefined when it knows none", () => {
    expect(nearestReplica("eu-west-2", ["ca-central-1", "eu-west-1"])?.region).toBe("eu-west-1");
    expect(nearestReplica("eu-west-2", ["ca-central-1"])).toBeUndefined();
    expect(nearestReplica("ca-central-1", ["ca-central-1", "us-east-1"])).toEqual({
      region: "ca-central-1",
      roundTripMs: 0,
    });
  });
});

describe("bundledStoreOptions", () => {
  const settings = { table: "rate-limits", region: "us-east-1", globalRegions: quickStartRegions };

  it("writes in-region when the function runs in a replica's region, with no round trip", () => {
    expect(bundledStoreOptions(settings, "sa-east-1")).toMatchObject({
      region: "sa-east-1",
      expectedRoundTripMs: 0,
    });
  });

  it("writes to the nearest replica elsewhere and tells the store its round trip", () => {
    expect(bundledStoreOptions(settings, "eu-central-1")).toMatchObject({
      region: "eu-west-1",
      expectedRoundTripMs: roundTripMs("eu-central-1", "eu-west-1"),
      globalRegions: quickStartRegions,
    });
  });

  it("with a single-region table, keeps the region and says how far it is", () => {
    expect(bundledStoreOptions({ table: "t", region: "us-east-1" }, "eu-west-1")).toEqual({
      table: "t",
      region: "us-east-1",
      expectedRoundTripMs: roundTripMs("eu-west-1", "us-east-1"),
      leaseRegion: "us-east-1",
      leaseRoundTripMs: roundTripMs("eu-west-1", "us-east-1"),
    });
  });

  it("reserves for hybrid counting in the table's first region, and says how far it is", () => {
    expect(bundledStoreOptions(settings, "ap-northeast-1")).toMatchObject({
      leaseRegion: quickStartRegions[0],
      leaseRoundTripMs: roundTripMs("ap-northeast-1", quickStartRegions[0] as string),
    });
    expect(
      bundledStoreOptions({ ...settings, leaseRegion: "eu-west-1" }, "eu-west-1"),
    ).toMatchObject({ leaseRegion: "eu-west-1", leaseRoundTripMs: 0 });
  });

  it("keeps the configured settings outside Lambda or in a region it does not know", () => {
    expect(bundledStoreOptions(settings, undefined)).toBe(settings);
    expect(bundledStoreOptions(settings, "mars-north-1")).toBe(settings);
  });
});
