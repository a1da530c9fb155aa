import { describe, expect, it } from "vitest";
import { afterPendingIo, type Scheduler } from "../../src/core/deadline.js";
import { hybridCounting } from "../../src/core/hybrid-counting.js";
import type { CounterSpec, CounterState, Store } from "../../src/core/types.js";
import { MemoryStore } from "../../src/stores/memory.js";

const T0 = Date.UTC(2026, 11, 2, 12, 0, 0);
const WINDOW_MS = 10_000;
/** Each way between the process and the store. */
const ONE_WAY_MS = 100;

const counter: CounterSpec = {
  key: "ip:203.0.113.10|ns|global",
  subject: "ip:203.0.113.10",
  algorithm: "fixed-window",
  limit: 100,
  window: { ms: WINDOW_MS },
  cost: 1,
  mode: "enforce",
  ruleId: "anonymous.global",
  namespace: "ns",
  counting: "hybrid",
};

/**
 * A far store with a clock of its own (a Durable Object, Redis's `TIME`), on the test's virtual
 * time: a call reaches it `ONE_WAY_MS` after it was sent, is counted at that time, and its answer
 * (with `storeNow`) is back `ONE_WAY_MS` later. Workers' isolates share no call in flight.
 */
class FarStore implements Store {
  readonly name = "far";
  readonly traits = { requestScopedIo: true };
  readonly memory = new MemoryStore();
  constructor(readonly time: { now: number }) {}

  async apply(counters: readonly CounterSpec[]): Promise<CounterState[]> {
    await new Promise((resolve) => setImmediate(resolve));
    this.time.now += ONE_WAY_MS;
    const at = T0 + this.time.now;
    const states = this.memory.applySync(counters, at);
    await new Promise((resolve) => setImmediate(resolve));
    this.time.now += ONE_WAY_MS;
    return states.map((state) => ({ ...state, storeNow: at }));
  }
}

describe("hybrid counting, a reservation answered within a round trip of the window's end", () => {
  it("admits the request that asked: the store counted it in its window", async () => {
    const time = { now: 0 };
    const store = new FarStore(time);
    const scheduler: Scheduler = {
      now: () => time.now,
      setTimeout: (callback, ms) => setTimeout(callback, ms),
      clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
      afterPendingIo,
    };
    const layer = hybridCounting(store, { scheduler, clock: () => T0 + time.now });
    // Sent 150 ms before the window ends: counted 50 ms before it, back 50 ms after it ends by
    // this process's reckoning (the store's answer leaves its window 50 ms, the way back 100).
    time.now = WINDOW_MS - 150;
    const [state] = await layer.apply([counter], T0 + time.now);
    expect(state?.allowed).toBe(true);
    const observe = { ...counter, cost: 0, mode: "observe" as const };
    const counted = store.memory.applySync([observe], T0 + WINDOW_MS - 1)[0] as CounterState;
    // Counted in the window it was sent in, and nothing beyond what was asked.
    expect(counted.count).toBeGreaterThanOrEqual(1);
    expect(counted.count).toBeLessThanOrEqual(counter.limit);
    // The units it brought are not spent in the next window: a request there reserves anew.
    const before = (store.memory.applySync([observe], T0 + WINDOW_MS + 1)[0] as CounterState).count;
    expect(before).toBe(0);
    time.now = WINDOW_MS + 500;
    const [next] = await layer.apply([counter], T0 + time.now);
    expect(next?.allowed).toBe(true);
    const after = store.memory.applySync([observe], T0 + WINDOW_MS + 600)[0] as CounterState;
    expect(after.count).toBeGreaterThanOrEqual(1);
  });
});
