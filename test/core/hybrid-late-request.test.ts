import { describe, expect, it } from "vitest";
import { afterPendingIo, type Scheduler } from "../../src/core/deadline.js";
import { hybridCounting } from "../../src/core/hybrid-counting.js";
import type { CounterSpec, CounterState, Store } from "../../src/core/types.js";
import { MemoryStore } from "../../src/stores/memory.js";

const T0 = Date.UTC(2026, 10, 30, 12, 0, 0);
const WINDOW_MS = 60_000;

/**
 * A remote store that counts at the caller's `now`, as DynamoDB and Redis with
 * `clock: "caller"` do: no clock of its own, no `storeNow` in its answers.
 */
class CallerClockStore implements Store {
  readonly name = "caller-clock";
  readonly memory = new MemoryStore();

  async apply(counters: readonly CounterSpec[], now: number): Promise<CounterState[]> {
    await new Promise((resolve) => setImmediate(resolve));
    return this.memory.applySync(counters, now);
  }
}

const counter: CounterSpec = {
  key: "ip:203.0.113.9|ns|global",
  subject: "ip:203.0.113.9",
  algorithm: "fixed-window",
  limit: 100,
  window: { ms: WINDOW_MS },
  cost: 1,
  mode: "enforce",
  ruleId: "anonymous.global",
  namespace: "ns",
  counting: "hybrid",
};

describe("hybrid counting on a store that counts at the caller's stamp", () => {
  it("admits a request stamped in a window from that window's units, however late it is decided", async () => {
    const store = new CallerClockStore();
    // The process's monotonic clock, in ms since T0 (the scheduler hybrid counting measures on).
    let monotonic = 0;
    const scheduler: Scheduler = {
      now: () => monotonic,
      setTimeout: (callback, ms) => setTimeout(callback, ms),
      clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
      afterPendingIo,
    };
    const layer = hybridCounting(store, { scheduler, clock: () => T0 + monotonic });
    // A busy subject: 30 requests in the window's first seconds; the process reserves ahead.
    for (let i = 0; i < 30; i++) {
      monotonic = 1000 + i * 100;
      const [state] = await layer.apply([counter], T0 + monotonic);
      expect(state?.allowed).toBe(true);
    }
    const observe = { ...counter, cost: 0, mode: "observe" as const };
    const counted = (store.memory.applySync([observe], T0 + 5000)[0] as CounterState).count;
    // Units counted for this process and not spent yet.
    expect(counted - 30).toBeGreaterThanOrEqual(1);
    // The other processes' reservations take the rest of the limit.
    store.memory.applySync([{ ...observe, cost: 100 - counted }], T0 + 5000);

    // Stamped 1 ms before the window ends, decided 5 s later (it waited for a reservation, the
    // event loop was busy): the store counts it in its stamp's window, where this process holds
    // units for it. Before: dropped as "after the store's window", then refused under the limit.
    monotonic = WINDOW_MS + 5000;
    const [late] = await layer.apply([counter], T0 + WINDOW_MS - 1);
    expect(late?.allowed).toBe(true);
    // Nothing beyond the limit: the window's count in the store is what it was.
    expect((store.memory.applySync([observe], T0 + WINDOW_MS - 1)[0] as CounterState).count).toBe(
      100,
    );
    // A request stamped in the next window never spends the ended window's units: it reserves
    // in its own window.
    const [next] = await layer.apply([counter], T0 + WINDOW_MS + 1);
    expect(next?.allowed).toBe(true);
    expect(
      (store.memory.applySync([observe], T0 + WINDOW_MS + 1)[0] as CounterState).count,
    ).toBeGreaterThanOrEqual(1);
  });
});
