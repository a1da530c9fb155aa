/**
 * `createRateLimit` counts through the core's counting step, as `limiter.check` does: the
 * decision budget, the fail modes with local counting, the block cache and the one cost check.
 * The "remote" store is the real memory store behind a switch that makes its calls fail or
 * stall, as a store that is down or silent does; without `applySync` it takes the remote path.
 */
import { describe, expect, it } from "vitest";
import { MAX_COST } from "../../src/core/cost.js";
import { EdgelimitError } from "../../src/core/errors.js";
import { createRateLimit, type RateLimitOptions } from "../../src/core/rate-limit.js";
import type { CounterSpec, CounterState, Store } from "../../src/core/types.js";
import { MemoryStore } from "../../src/stores/memory.js";

const T0 = Date.UTC(2026, 10, 30, 12, 0, 10);

type Mode = "up" | "down" | "silent" | "stateless";

function switchedStore() {
  const inner = new MemoryStore();
  let mode: Mode = "up";
  let calls = 0;
  const store: Store = {
    name: "switched",
    apply(counters: readonly CounterSpec[], now: number): Promise<CounterState[]> {
      calls++;
      if (mode === "down") return Promise.reject(new Error("store is down"));
      if (mode === "silent") return new Promise(() => {});
      if (mode === "stateless") return Promise.resolve([]);
      return inner.apply(counters, now);
    },
  };
  return {
    store,
    calls: () => calls,
    set: (next: Mode) => {
      mode = next;
    },
  };
}

function setup(options: Partial<RateLimitOptions> = {}) {
  const switched = switchedStore();
  const limiter = createRateLimit({
    store: switched.store,
    limit: 2,
    window: "60s",
    clock: () => T0,
    ...options,
  });
  const limit = async (key: string) => {
    const result = await limiter.limit({ key });
    return `${result.success} ${result.reason} ${result.remaining}`;
  };
  return { ...switched, limiter, limit };
}

describe("createRateLimit through the counting step", () => {
  it("counts a key in the process against its limit while the store is down (failMode local, the default)", async () => {
    const { set, limit } = setup();
    set("down");
    expect(await limit("tenant")).toBe("true store-failed-local 1");
    expect(await limit("tenant")).toBe("true store-failed-local 0");
    expect(await limit("tenant")).toBe("false store-failed-local 0");
  });

  it("tells onStoreError each failure, with its cause", async () => {
    const errors: unknown[] = [];
    const { set, limit } = setup({ onStoreError: (error) => errors.push(error) });
    set("down");
    await limit("tenant");
    await limit("tenant");
    expect(errors.map(String)).toEqual(["Error: store is down", "Error: store is down"]);
  });

  it("admits on a failed store with failMode open, and refuses with closed", async () => {
    const open = setup({ failMode: "open" });
    open.set("down");
    for (let i = 0; i < 3; i++) expect(await open.limit("tenant")).toBe("true store-failed-open 0");
    const closed = setup({ failMode: "closed" });
    closed.set("down");
    const refused = await closed.limiter.limit({ key: "tenant" });
    expect(refused).toMatchObject({
      success: false,
      reason: "store-failed-closed",
      retryAfterSeconds: 5,
    });
  });

  it("takes a store that answers no state for the key as failed, and counts locally", async () => {
    const { set, limit } = setup();
    set("stateless");
    expect(await limit("tenant")).toBe("true store-failed-local 1");
  });

  it("answers within the budget when the store stays silent", async () => {
    const { set, limit } = setup();
    set("silent");
    expect(await limit("tenant")).toBe("true store-failed-local 1");
  }, 10_000);

  it("takes a budget of its own, as a policy's", async () => {
    const { set, limiter } = setup({ budget: "20ms", failMode: "open" });
    set("silent");
    expect((await limiter.limit({ key: "tenant" })).reason).toBe("store-failed-open");
  }, 10_000);

  it("answers a blocked key from the block cache, without a store call", async () => {
    const { limit, calls } = setup();
    expect(await limit("tenant")).toBe("true within-limit 1");
    expect(await limit("tenant")).toBe("true within-limit 0");
    expect(await limit("tenant")).toBe("false over-limit 0");
    expect(calls()).toBe(3);
    expect(await limit("tenant")).toBe("false blocked-cached 0");
    expect(calls()).toBe(3);
  });

  it.each([
    [1.5, "a fraction"],
    [MAX_COST + 1, "beyond the largest cost"],
    [Number.NaN, "not a number"],
  ])("refuses a cost of %s (%s) with EL_BAD_COST, as every entry does", async (cost) => {
    const { limiter, calls } = setup();
    const refusal = await limiter.limit({ key: "tenant", cost }).catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(EdgelimitError);
    expect((refusal as EdgelimitError).code).toBe("EL_BAD_COST");
    expect(calls()).toBe(0);
  });

  it("checks a key without counting it at a cost of 0", async () => {
    const { limiter, limit } = setup();
    await limiter.limit({ key: "tenant", cost: 0 });
    expect(await limit("tenant")).toBe("true within-limit 1");
  });
});
