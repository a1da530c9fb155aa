/**
 * `failMode: local` for a `counting: hybrid` rule (core/local-fallback.ts): a store that is
 * slow is not a store that failed. A request that misses its budget while the store answers
 * was reserved all the same, so counting it again from a fresh local count would admit beyond
 * the limit; it is refused, and counted locally only once the store's own calls fail. The
 * "remote" store is the real memory store behind a delay and a status the test sets.
 */
import { describe, expect, it } from "vitest";
import { hybridCounting } from "../../src/core/hybrid-counting.js";
import type { CounterSpec, CounterState, Store, StoreStatus } from "../../src/core/types.js";
import { createLimiter } from "../../src/limiter.js";
import { definePolicy } from "../../src/policy/load.js";
import { MemoryStore } from "../../src/stores/memory.js";
import { withinOneWindow } from "../support/windows.js";

/** The memory store, `delayMs` away, reporting `state` as its calls' status. */
function slowStore(delayMs: number, state: StoreStatus["state"] | undefined) {
  const inner = new MemoryStore();
  const status = (): StoreStatus => ({
    state: state ?? "ok",
    failures: 0,
    lastError: undefined,
    lastErrorAt: undefined,
    breakerOpened: 0,
    breakerRejected: 0,
    openParts: [],
  });
  const store: Store = {
    name: "slow",
    traits: state === undefined ? {} : { status },
    async apply(counters: readonly CounterSpec[], now: number): Promise<CounterState[]> {
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      return inner.apply(counters, now);
    },
  };
  return { store, inner };
}

function limiterOn(store: Store, counting: "exact" | "hybrid") {
  const limiter = createLimiter({
    policy: definePolicy({
      budget: 20,
      tiers: { anonymous: { global: { limit: 5, window: "1m", counting } } },
    }),
    store: counting === "hybrid" ? hybridCounting(store) : store,
    onStoreError: false,
    blockCache: false,
  });
  return async (ip: string) => {
    const verdict = await limiter.check({ ip, path: "/" });
    return `${verdict.status} ${verdict.reason}`;
  };
}

describe("failMode: local on a hybrid rule whose store is slow, not failed", () => {
  it("refuses a request that missed its budget while the store answers", async () => {
    const { store } = slowStore(150, "ok");
    const check = limiterOn(store, "hybrid");
    const verdicts = await Promise.all(Array.from({ length: 8 }, () => check("203.0.113.7")));
    expect(verdicts).toEqual(Array.from({ length: 8 }, () => "429 store-failed-local"));
  });

  it("tells the client to come back in a second, with no count it does not know", async () => {
    const { store } = slowStore(150, "ok");
    const limiter = createLimiter({
      policy: definePolicy({
        budget: 20,
        tiers: { anonymous: { global: { limit: 5, window: "1m", counting: "hybrid" } } },
      }),
      store: hybridCounting(store),
      onStoreError: false,
    });
    const verdict = await limiter.check({ ip: "203.0.113.8", path: "/" });
    expect(verdict.retryAfterSeconds).toBe(1);
    expect(verdict.outcomes[0]?.state.countUnknown).toBe(true);
  });

  it("counts locally once the store's own calls fail, and where the store has no status", async () => {
    for (const state of ["failing", "open", undefined] as const) {
      // Slower than the seven checks take, even on a loaded machine: with 150 ms, a late answer
      // once landed during them and the next checks were admitted from what it reserved.
      const { store } = slowStore(3000, state);
      const check = limiterOn(store, "hybrid");
      // The local count is per minute window on the real clock: the seven must not straddle one.
      await withinOneWindow(60_000, 2_000);
      const verdicts: string[] = [];
      for (let i = 0; i < 7; i++) verdicts.push(await check("203.0.113.9"));
      expect(verdicts).toEqual([
        ...Array.from({ length: 5 }, () => "200 store-failed-local"),
        "429 store-failed-local",
        "429 store-failed-local",
      ]);
    }
  });

  it("still counts an exact rule locally while the store is slow", async () => {
    const { store } = slowStore(150, "ok");
    const check = limiterOn(store, "exact");
    // The local count is per minute window on the real clock: the six must not straddle one.
    await withinOneWindow(60_000, 2_000);
    const verdicts: string[] = [];
    for (let i = 0; i < 6; i++) verdicts.push(await check("203.0.113.10"));
    expect(verdicts).toEqual([
      ...Array.from({ length: 5 }, () => "200 store-failed-local"),
      "429 store-failed-local",
    ]);
  });
});
