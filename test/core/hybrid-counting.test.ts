import { describe, expect, it } from "vitest";
import { hybridCounting } from "../../src/core/hybrid-counting.js";
import type { CounterSpec, CounterState, Store } from "../../src/core/types.js";
import { createLimiter } from "../../src/limiter.js";
import { definePolicy, parsePolicy } from "../../src/policy/load.js";
import type { PolicyInput } from "../../src/policy/schema.js";
import { MemoryStore } from "../../src/stores/memory.js";
import { readCounter } from "../support/hybrid-fleet.js";

const T0 = Date.UTC(2026, 10, 30, 12, 0, 0);

/** One shared counter store reached asynchronously, as a remote store is: counts its calls. */
class SharedStore implements Store {
  readonly name = "shared";
  readonly local = false;
  readonly memory = new MemoryStore();
  calls = 0;
  failing = false;

  async apply(counters: readonly CounterSpec[], now: number): Promise<CounterState[]> {
    this.calls++;
    // Let other requests interleave, as they would while a round trip is in flight.
    await new Promise((resolve) => setImmediate(resolve));
    if (this.failing) throw new Error("store down");
    return this.memory.applySync(counters, now);
  }

  async reset(counters: readonly CounterSpec[]): Promise<void> {
    await this.memory.reset(counters);
  }
}

function policy(limit: number, extra: Partial<PolicyInput> = {}): PolicyInput {
  return {
    tiers: {
      anonymous: { global: { limit, window: "60s", counting: "hybrid" } },
    },
    ...extra,
  };
}

/** `processes` limiters (each its own hybrid layer) on one store, on one clock. */
function fleet(input: PolicyInput, processes: number, store = new SharedStore()) {
  const clock = { now: T0 };
  const resolved = definePolicy(input);
  const limiters = Array.from({ length: processes }, () =>
    createLimiter({
      policy: resolved,
      store: hybridCounting(store),
      clock: () => clock.now,
      onStoreError: () => {},
    }),
  );
  return { store, clock, limiters };
}

describe("hybrid counting", () => {
  it("admits exactly the limit from one busy process, with a store call for every ~2 s of its traffic", async () => {
    const { store, clock, limiters } = fleet(policy(6000), 1);
    const [limiter] = limiters;
    let admitted = 0;
    // 200 requests/s for 60 s: 12,000 requests against a limit of 6,000 a minute.
    for (let i = 0; i < 12_000; i++) {
      clock.now = T0 + i * 5;
      if ((await limiter?.check({ ip: "203.0.113.7", path: "/" }))?.action === "allow") admitted++;
    }
    expect(admitted).toBe(6000);
    // Refused requests after the limit are answered by the block cache; the admitted ones cost
    // about one call per 400 (2 s at 200/s), plus the exact tail near the limit.
    expect(store.calls / 6000).toBeLessThan(0.05);
  });

  it("never admits more than the limit across many processes hit at once", async () => {
    const { store, clock, limiters } = fleet(policy(1000), 12);
    let admitted = 0;
    let sent = 0;
    // Ten rounds of bursts: each process receives 40 concurrent requests per round.
    for (let round = 0; round < 10; round++) {
      clock.now = T0 + round * 3000;
      const verdicts = await Promise.all(
        limiters.flatMap((limiter) =>
          Array.from({ length: 40 }, () => limiter.check({ ip: "203.0.113.7", path: "/" })),
        ),
      );
      sent += verdicts.length;
      admitted += verdicts.filter((v) => v.action === "allow").length;
    }
    expect(sent).toBe(4800);
    expect(admitted).toBeLessThanOrEqual(1000);
    // What is held and never used is a few seconds of traffic at most.
    expect(admitted).toBeGreaterThan(900);
    // The store's count holds every admitted request: nothing lost.
    const [state] = store.memory.applySync(
      [readCounter(definePolicy(policy(1000)), "ip:203.0.113.7")],
      clock.now,
    );
    expect(state?.count).toBeGreaterThanOrEqual(admitted);
    // Bursts 3 s apart at a subject on its way to the limit: reservations cover 2 s ahead, so
    // most bursts need one (coalesced) per process.
    expect(store.calls).toBeLessThan(sent * 0.125);
  });

  it("counts a subject it has not seen busy exactly: one store call per request", async () => {
    const { store, limiters } = fleet(policy(10), 1);
    const [limiter] = limiters;
    for (let i = 0; i < 5; i++) {
      expect((await limiter?.check({ ip: `198.51.100.${i}`, path: "/" }))?.action).toBe("allow");
    }
    expect(store.calls).toBe(5);
  });

  it("drops held units when their window ends", async () => {
    const { store, clock, limiters } = fleet(policy(100), 1);
    const [limiter] = limiters;
    for (let i = 0; i < 50; i++) {
      clock.now = T0 + 50_000 + i * 100;
      await limiter?.check({ ip: "203.0.113.9", path: "/" });
    }
    // The next window: a fresh count; units held from the last one are not spent in it.
    clock.now = T0 + 60_000;
    const verdict = await limiter?.check({ ip: "203.0.113.9", path: "/" });
    expect(verdict?.action).toBe("allow");
    const [state] = store.memory.applySync(
      [readCounter(definePolicy(policy(100)), "ip:203.0.113.9")],
      clock.now,
    );
    // The first request of the window reserved its own unit plus the rate it had seen.
    expect(state?.count).toBeGreaterThanOrEqual(1);
    expect(state?.count).toBeLessThan(100);
  });

  it("gives reserved units back when an exact rule refuses the request", async () => {
    const input: PolicyInput = {
      tiers: {
        anonymous: {
          global: { limit: 1000, counting: "hybrid" },
          paths: { "/api/export": { limit: 3 } },
        },
      },
    };
    const { clock, limiters } = fleet(input, 1);
    const [limiter] = limiters;
    const seen: string[] = [];
    for (let i = 0; i < 10; i++) {
      clock.now = T0 + i * 10;
      seen.push((await limiter?.check({ ip: "203.0.113.7", path: "/api/export" }))?.action ?? "");
    }
    expect(seen.filter((action) => action === "allow")).toHaveLength(3);
    // The global rule spent only the 3 admitted requests: 997 left for other paths.
    let others = 0;
    for (let i = 0; i < 1200; i++) {
      clock.now = T0 + 1000 + i * 10;
      if ((await limiter?.check({ ip: "203.0.113.7", path: "/" }))?.action === "allow") others++;
    }
    expect(others).toBe(997);
  });

  it("keeps the fail mode when the store fails, and gives held units back", async () => {
    const { store, clock, limiters } = fleet(policy(100, { defaults: { failMode: "closed" } }), 1);
    const [limiter] = limiters;
    for (let i = 0; i < 30; i++) {
      clock.now = T0 + i * 50;
      await limiter?.check({ ip: "203.0.113.7", path: "/" });
    }
    store.failing = true;
    let unavailable = 0;
    for (let i = 0; i < 200; i++) {
      clock.now = T0 + 2000 + i * 10;
      const verdict = await limiter?.check({ ip: "203.0.113.7", path: "/" });
      if (verdict?.status === 503) unavailable++;
    }
    // Held units answer while they last; then every request needs the store and fails closed.
    expect(unavailable).toBeGreaterThan(100);
  });

  it("keeps a challenge rule's band: a pass holder's units are never spent without a pass", async () => {
    const input: PolicyInput = {
      tiers: {
        anonymous: {
          global: { limit: 100, action: "challenge", challengeBand: 2, counting: "hybrid" },
        },
      },
    };
    const { clock, limiters } = fleet(input, 1);
    const [limiter] = limiters;
    const actions = { withPass: 0, withoutPass: 0, challenged: 0 };
    // Busy pass holders reserve under the band (200); requests without a pass may use only
    // what the limit (100) leaves.
    for (let i = 0; i < 600; i++) {
      clock.now = T0 + i * 50;
      const passVerified = i % 2 === 0;
      const verdict = await limiter?.check({ ip: "203.0.113.7", path: "/", passVerified });
      if (verdict?.action === "allow") {
        if (passVerified) actions.withPass++;
        else actions.withoutPass++;
      } else if (verdict?.action === "challenge") actions.challenged++;
    }
    // Both kinds share one counter: everything admitted stays within the band, and requests
    // without a pass stop once the shared count reaches the limit.
    expect(actions.withPass + actions.withoutPass).toBeLessThanOrEqual(200);
    expect(actions.withoutPass).toBeLessThanOrEqual(100);
    expect(actions.withoutPass).toBeGreaterThan(0);
    expect(actions.challenged).toBeGreaterThan(0);
  });

  it("refuses hybrid counting where it cannot work, with the reason", () => {
    expect(() =>
      parsePolicy(
        "tiers:\n  anonymous:\n    global: { limit: 10, algorithm: token-bucket, counting: hybrid }\n",
      ),
    ).toThrow(/counting: hybrid needs a windowed algorithm/);
    expect(() =>
      parsePolicy(
        "tiers:\n  anonymous:\n    global: { limit: 10, window: 60s, backend: approximate, counting: hybrid }\n",
      ),
    ).toThrow(/backend: approximate/);
    expect(() =>
      parsePolicy("tiers:\n  anonymous:\n    global: { limit: 10, counting: lazy }\n"),
    ).toThrow(/counting/);
  });
});
