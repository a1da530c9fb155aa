import { describe, expect, it, vi } from "vitest";
import { simulate } from "../../src/simulate/run.js";
import { loadScenario } from "../../src/simulate/scenario.js";
import { FIXTURES, fixtureScenario, scenarioOf, twoRegions } from "./helpers.js";

describe("edgelimit simulate", () => {
  it("is deterministic: the same scenario and seed give byte-identical reports, another seed another", async () => {
    const scenario = fixtureScenario("ci.yaml");
    const first = JSON.stringify(await simulate(scenario));
    const second = JSON.stringify(await simulate(scenario));
    expect(second).toBe(first);
    expect(JSON.stringify(await simulate(scenario, { seed: 8 }))).not.toBe(first);
  }, 60_000);

  it("reads no wall clock and no Math.random on the simulation path", async () => {
    const scenario = twoRegions({ modes: ["two-writes", "exact", "hybrid"], duration: "20s" });
    const expected = JSON.stringify(await simulate(scenario));
    const forbidden = () => {
      throw new Error("the simulation read the wall clock or Math.random");
    };
    const now = vi.spyOn(Date, "now").mockImplementation(forbidden);
    const random = vi.spyOn(Math, "random").mockImplementation(forbidden);
    const monotonic = vi.spyOn(performance, "now").mockImplementation(forbidden);
    let report: string;
    try {
      report = JSON.stringify(await simulate(scenario));
    } finally {
      now.mockRestore();
      random.mockRestore();
      monotonic.mockRestore();
    }
    expect(report).toBe(expected);
  }, 60_000);

  it("hybrid+holder (region holders, opt-in): the far region answers from its own replica, the lease region as without holders, nothing beyond the limit", async () => {
    const scenario = loadScenario(`${FIXTURES}/ci.yaml`, ["hybrid", "hybrid+holder"]);
    const [hybrid, holder] = (await simulate(scenario)).modes;
    const far = (mode: typeof hybrid) => mode?.legitimateLatencyMs.byRegion["eu-west-1"];
    const lease = (mode: typeof hybrid) => mode?.legitimateLatencyMs.byRegion["us-east-1"];
    // Without holders nearly half the far region's legitimate requests wait for us-east-1
    // (75 ms away: 85 of 187); with them, a third as many, and its typical request is answered
    // from its own replica.
    const waited = (mode: typeof hybrid) => mode?.legitimateWaits["eu-west-1"]?.waited ?? 0;
    expect(waited(hybrid)).toBeGreaterThan(60);
    expect(waited(holder) * 2).toBeLessThan(waited(hybrid));
    expect(far(holder)?.p50).toBeLessThan(20);
    // The lease region reserves on the lease item itself, with holders or without.
    expect(lease(holder)?.p99).toBeLessThanOrEqual((lease(hybrid)?.p99 ?? 0) + 1);
    expect(holder?.overAdmission.requests).toBe(0);
    expect(holder?.legitimate.refusedUnderLimit).toBe(0);
  }, 60_000);

  it("hybrid+allowance (region holders and allowances, opt-in): the far region's legitimate p99 at its own replica's latency, nothing beyond the limit", async () => {
    const scenario = loadScenario(`${FIXTURES}/ci.yaml`, [
      "exact",
      "hybrid+holder",
      "hybrid+allowance",
    ]);
    const [exact, holder, allowance] = (await simulate(scenario)).modes;
    const far = (mode: typeof exact) => mode?.legitimateLatencyMs.byRegion["eu-west-1"];
    // Holders leave a subject's first request in the far region waiting for us-east-1 (75 ms
    // away); its allowance answers it there, so the p99 is within 10 ms of per-region's.
    expect(far(holder)?.p99).toBeGreaterThan(70);
    expect(far(allowance)?.p99).toBeLessThanOrEqual((far(exact)?.p99 ?? 0) + 10);
    expect(allowance?.overAdmission.requests).toBe(0);
    expect(allowance?.legitimate.refusedUnderLimit).toBeLessThanOrEqual(
      Math.ceil((allowance?.legitimate.underLimitRequests ?? 0) / 1000),
    );
  }, 60_000);

  it("loses the two-writes design's increments to last-writer-wins under the spread attack, and none with per-region items", async () => {
    const report = await simulate(twoRegions());
    const [twoWrites, exact] = report.modes;
    // Both regions ADD to one shared item: about half the increments are overwritten.
    expect(twoWrites?.lostIncrements.share).toBeGreaterThan(0.3);
    expect(exact?.lostIncrements.lost).toBe(0);
    expect(exact?.lostIncrements.counted).toBeGreaterThan(0);
    // Two-writes writes on for every blocked request; the block cache answers them instead.
    expect(twoWrites?.store.subjects.busy.maxOperationsPerRequest).toBeGreaterThanOrEqual(1);
    expect(exact?.store.subjects.busy.maxOperationsPerRequest).toBeLessThan(0.1);
  }, 60_000);

  it("runs the two-writes design as written: two sequential writes, the global rule skipped after a path refusal", async () => {
    const scenario = scenarioOf({
      duration: "60s",
      modes: ["two-writes"],
      regions: { "us-east-1": {} },
      store: {
        kind: "dynamodb",
        replicas: ["us-east-1"],
        rttMs: { "us-east-1": { "us-east-1": 6 } },
      },
      deployment: { kind: "gateway", processes: 1 },
      traffic: {
        legitimate: [
          { clients: 1, requestsPerMinute: 10, arrival: "fixed", paths: { "/api/reports": 1 } },
        ],
      },
    });
    const latencies: number[] = [];
    const report = await simulate(scenario, {
      onDecision: (_mode, _arrival, decision) => latencies.push(decision.durationMs),
    });
    const [twoWrites] = report.modes;
    // /api/reports allows 5 a minute: five requests write both rules, five only the path rule.
    expect(twoWrites?.admitted).toBe(5);
    expect(twoWrites?.store.writeUnits).toBe(5 * 2 + 5);
    // One round trip after another, for the admitted: 12 ms; 6 ms for the refused.
    expect(latencies).toEqual([12, 12, 12, 12, 12, 6, 6, 6, 6, 6]);
  }, 60_000);

  it("fails over to its fail modes past the budget when a replica is slow (open and local side by side), closed on a fail-closed path, and counts again after", async () => {
    const scenario = scenarioOf({
      duration: "90s",
      modes: ["exact"],
      failModes: ["open", "local"],
      regions: { "us-east-1": {} },
      store: {
        kind: "dynamodb",
        replicas: ["us-east-1"],
        rttMs: { "us-east-1": { "us-east-1": 6 } },
        incidents: [{ replica: "us-east-1", from: "30s", to: "60s", extraMs: 200 }],
      },
      deployment: { kind: "gateway", processes: 1 },
      traffic: {
        legitimate: [
          {
            clients: 20,
            requestsPerMinute: 10,
            paths: { "/api/products": 0.5, "/api/billing/invoice": 0.5 },
          },
        ],
      },
    });
    const decisions: { at: number; reason: string }[] = [];
    const start = Date.parse(scenario.start);
    const report = await simulate(scenario, {
      onDecision: (_mode, _arrival, decision, epochAt) =>
        decisions.push({ at: epochAt - start, reason: decision.reason }),
    });
    const [open, local] = report.modes;
    expect(open).toMatchObject({ mode: "exact", failMode: "open", failedLocal: 0 });
    expect(local).toMatchObject({ mode: "exact", failMode: "local", failedOpen: 0 });
    expect(open?.failedOpen).toBeGreaterThan(0);
    // The same requests, counted in the instance instead of let through.
    expect(local?.failedLocal).toBe(open?.failedOpen);
    for (const mode of [open, local]) expect(mode?.failedClosed).toBeGreaterThan(0);
    const failed = decisions.filter((d) => d.reason.startsWith("store-failed"));
    // Only while the replica is slow: 50 ms of budget beyond the 6 ms round trip, never more.
    expect(failed.every((d) => d.at >= 30_000 && d.at < 60_000)).toBe(true);
    expect(open?.latencyMs.p99).toBeLessThanOrEqual(56.5);
    expect(local?.latencyMs.p99).toBeLessThanOrEqual(56.5);
  }, 60_000);

  it("rejects a bad scenario with messages that name the field", () => {
    expect(() =>
      scenarioOf({
        duration: 60,
        regions: {},
        store: { kind: "memory" },
        deployment: { kind: "gateway" },
        traffic: {},
      }),
    ).toThrow(/duration: a bare number is ambiguous/);
    expect(() =>
      twoRegions({
        store: {
          kind: "dynamodb",
          replicas: ["us-east-1"],
          rttMs: { "us-east-1": { "us-east-1": 5 } },
        },
      }),
    ).toThrow(/store\.rttMs\.eu-west-1\.us-east-1: give the round trip/);
    expect(() =>
      twoRegions({ store: { kind: "redis", rttMs: { "us-east-1": 1, "eu-west-1": 70 } } }),
    ).toThrow(/modes: "two-writes" is a DynamoDB design/);
    expect(() =>
      twoRegions({
        traffic: { attackers: [{ kind: "flood", requestsPerSecond: 1, regions: ["x"] }] },
      }),
    ).toThrow(/traffic\.attackers\.0\.kind/);
    expect(() => twoRegions({ colour: "blue" })).toThrow(/colour/);
  });

  it("refuses a scenario beyond its documented size, at once, naming the bound", () => {
    // 200,000,000 clients used to grow to 2 GB and die with signal 11 and no message.
    const started = performance.now();
    expect(() =>
      twoRegions({ traffic: { legitimate: [{ clients: 200_000_000, requestsPerMinute: 1 }] } }),
    ).toThrow(
      /200,000,000 clients in all; simulate holds every client from the start and takes at most 1,000,000/,
    );
    expect(performance.now() - started).toBeLessThan(1000);
    const rotation = {
      attackers: [{ kind: "ipv6-rotation", requestsPerSecond: 800, regions: ["us-east-1"] }],
    };
    expect(() => twoRegions({ duration: "1h", traffic: rotation })).toThrow(
      /about 2,880,000 subject-windows .* takes at most 1,000,000/,
    );
    expect(() =>
      twoRegions({
        duration: "2000h",
        traffic: {
          attackers: [{ kind: "scraper", requestsPerSecond: 800, regions: ["us-east-1"] }],
        },
      }),
    ).toThrow(/about 5,760,000,000 requests per mode .* at most 100,000,000/);
    let thrown: unknown;
    try {
      twoRegions({ duration: "1h", traffic: rotation });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toMatchObject({ code: "EL_SCENARIO_TOO_LARGE" });
    // Just under the bounds is a scenario like any other.
    expect(() => twoRegions({ duration: "20m", traffic: rotation })).not.toThrow();
  });

  it("simulates a Redis primary and per-process memory stores with the same engine", async () => {
    const base = {
      duration: "60s",
      modes: ["exact"],
      regions: { "us-east-1": {}, "eu-west-1": {} },
      deployment: { kind: "gateway", processes: 2 },
      traffic: {
        attackers: [{ kind: "spread", requestsPerSecond: 50, regions: ["us-east-1", "eu-west-1"] }],
      },
    };
    const redis = await simulate(
      scenarioOf({ ...base, store: { kind: "redis", rttMs: { "us-east-1": 1, "eu-west-1": 70 } } }),
    );
    const memory = await simulate(scenarioOf({ ...base, store: { kind: "memory" } }));
    // One primary counts exactly (on its own clock, as Redis TIME: a request sent just before a
    // window ends from 70 ms away may count in the next); four processes alone admit 4x.
    expect(redis.modes[0]?.overAdmission.requests).toBeLessThanOrEqual(2);
    expect(memory.modes[0]?.attackers.admitted).toBe(4 * 60);
    expect(redis.modes[0]?.attackers.admitted).toBeLessThanOrEqual(62);
  }, 60_000);

  it("recycles Worker isolates, and runs hybrid counting with a lease table of its own", async () => {
    const store = {
      kind: "dynamodb",
      replicas: ["us-east-1", "eu-west-1"],
      rttMs: {
        "us-east-1": { "us-east-1": 6, "eu-west-1": 75 },
        "eu-west-1": { "us-east-1": 75, "eu-west-1": 6 },
      },
      lease: { table: "rate-limit-leases", region: "us-east-1" },
    };
    const workers = await simulate(
      twoRegions({
        modes: ["exact"],
        store,
        deployment: { kind: "workers", isolates: 2, lifetime: "20s" },
      }),
    );
    // Two isolates per region, each replaced after 20 s: three generations in a minute.
    expect(workers.modes[0]?.instances.created).toBe(12);
    const [exact, hybrid] = (await simulate(twoRegions({ modes: ["exact", "hybrid"], store })))
      .modes;
    // Per-region items admit up to the limit in each region before the other's count arrives;
    // hybrid reserves in one region's table: nothing beyond the limit, nothing lost.
    expect(exact?.overAdmission.requests).toBe(60);
    expect(hybrid?.overAdmission.requests).toBe(0);
    expect(hybrid?.lostIncrements.lost).toBe(0);
    expect(hybrid?.failedOpen).toBe(0);
  }, 60_000);

  it("names the subject-window furthest short of its limit: a pro user over its limit of 1,000 a minute", async () => {
    const scenario = twoRegions({
      modes: ["hybrid"],
      duration: "120s",
      traffic: {
        legitimate: [
          {
            name: "pro",
            clients: 1,
            tier: "authenticated",
            plan: "pro",
            requestsPerMinute: 1500,
            paths: { "/api/products": 1 },
          },
        ],
      },
    });
    const [hybrid] = (await simulate(scenario)).modes;
    const atLimit = hybrid?.legitimate.atLimit;
    expect(atLimit?.windows).toBeGreaterThanOrEqual(2);
    const worst = atLimit?.worst;
    expect(worst).toMatchObject({ rule: "authenticated.plan.pro", limit: 1000, reference: 1000 });
    expect(worst?.subject).toMatch(/^user:/);
    // Its window is a minute of the run, and its shortfall the report's maximum.
    expect(Number.isSafeInteger(worst?.window)).toBe(true);
    expect(worst?.admitted).toBeLessThanOrEqual(1000);
    expect(((worst?.reference ?? 0) - (worst?.admitted ?? 0)) / 1000).toBeCloseTo(
      atLimit?.maxShortfall ?? -1,
      10,
    );
    expect(hybrid?.overAdmission.requests).toBe(0);
  }, 60_000);

  it("keeps a loose pace: a small scenario runs at more than 20,000 simulated requests a second", async () => {
    const scenario = twoRegions({ modes: ["exact"], duration: "120s" });
    const started = performance.now();
    const report = await simulate(scenario);
    const seconds = (performance.now() - started) / 1000;
    expect((report.modes[0]?.requests ?? 0) / seconds).toBeGreaterThan(20_000);
  }, 60_000);
});
