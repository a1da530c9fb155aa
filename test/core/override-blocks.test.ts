/**
 * A block the block cache remembers must not outlive the overrides it was counted under: a
 * request still counting in the store when a raised limit lands (set here, or read from the
 * store) is decided on the limit of before, and its block, remembered after the cache was
 * cleared for the new limit, would refuse the subject from memory until the window ends.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { CounterSpec, CounterState, StoreTraits } from "../../src/core/types.js";
import { createLimiter, type Limiter } from "../../src/limiter.js";
import { definePolicy } from "../../src/policy/load.js";
import { MemoryStore } from "../../src/stores/memory.js";

const POLICY = definePolicy({ tiers: { anonymous: { global: { limit: 3, window: "1h" } } } });
const client = { ip: "203.0.113.9", path: "/api/x" };

/** Counts as the memory store does, but answers only when let through (as a remote store). */
class GatedStore extends MemoryStore {
  override readonly traits: StoreTraits = {};
  gate: Promise<void> | undefined;

  override async apply(counters: readonly CounterSpec[], now: number): Promise<CounterState[]> {
    const states = this.applySync(counters, now);
    if (this.gate !== undefined) await this.gate;
    return states;
  }
}

const open: Limiter[] = [];
afterEach(() => {
  for (const limiter of open.splice(0)) limiter.close();
});

describe("the block cache and overrides", () => {
  it("a request counted under the old limit, answered after a raise, leaves no block for the new limit", async () => {
    const store = new GatedStore();
    const limiter = createLimiter({ policy: POLICY, store, onStoreError: false });
    open.push(limiter);
    for (let i = 0; i < 3; i++) expect((await limiter.check(client)).action).toBe("allow");
    let release = () => {};
    store.gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const counting = limiter.check(client); // the 4th: over the limit of 3, still in the store
    await limiter.overrides.set({ subject: `ip:${client.ip}`, limit: 100 });
    store.gate = undefined;
    release();
    expect((await counting).action).toBe("block");
    const after = await limiter.check(client);
    expect(after.action).toBe("allow");
    expect(after.limit).toBe(100);
  });
});
