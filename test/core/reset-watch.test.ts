/**
 * How the block cache hears of resets made by other processes (core/reset-watch.ts), beyond the
 * real Redis stores' tests (test/redis/reset-reach.test.ts): what it does when the store's log
 * cannot be read, and where a request cannot await another's read. The store is the real memory
 * store reached as a remote one, with a log of resets kept beside it.
 */
import { describe, expect, it } from "vitest";
import { RESET_CHECK_MS, ResetWatch } from "../../src/core/reset-watch.js";
import type { CounterSpec, CounterState, ResetsSince, Store } from "../../src/core/types.js";
import { createLimiter } from "../../src/limiter.js";
import { definePolicy } from "../../src/policy/load.js";
import { MemoryStore } from "../../src/stores/memory.js";

/** One memory store shared by several "processes", with a log of the keys reset. */
function sharedStore() {
  const memory = new MemoryStore();
  const log: string[] = [];
  const state = { reads: 0, down: false };
  const processStore = (requestScopedIo: boolean): Store => ({
    name: "shared",
    traits: { requestScopedIo },
    async apply(counters: readonly CounterSpec[], now: number): Promise<CounterState[]> {
      await new Promise((resolve) => setImmediate(resolve));
      return memory.applySync(counters, now);
    },
    async reset(counters: readonly CounterSpec[]): Promise<void> {
      await memory.reset(counters);
      for (const counter of counters) log.push(counter.key);
    },
    followResets(cache, scheduler) {
      return new ResetWatch(cache, readLog, {
        storeName: "shared",
        shared: !requestScopedIo,
        scheduler,
      });
    },
  });
  const readLog = async (mark: string | undefined): Promise<ResetsSince> => {
    state.reads++;
    await new Promise((resolve) => setImmediate(resolve));
    if (state.down) throw new Error("the log is out of reach");
    const keys = mark === undefined ? "all" : log.slice(Number(mark));
    return { mark: String(log.length), keys };
  };
  return { processStore, state };
}

const policy = definePolicy({
  version: 1,
  identity: { ip: { source: "socket" } },
  namespaces: { login: { match: { path: "/login" }, limit: 1, window: "15m" } },
});
const login = { ip: "198.51.100.3", path: "/login" };

describe("the block cache's reads of the reset log", () => {
  it("go on refusing while the log cannot be read, tried again a second later, not on every request", async () => {
    const shared = sharedStore();
    let now = Date.UTC(2026, 11, 1, 12, 0, 0);
    const a = createLimiter({ store: shared.processStore(false), policy, clock: () => now });
    const b = createLimiter({ store: shared.processStore(false), policy, clock: () => now });
    expect((await b.check(login)).reason).toBe("within-limit");
    expect((await b.check(login)).reason).toBe("over-limit");
    expect((await b.check(login)).reason).toBe("blocked-cached");
    shared.state.down = true;
    await a.reset(login);
    const reads = shared.state.reads;
    const reasons = new Set<string>();
    for (let i = 0; i < 100; i++) {
      now += RESET_CHECK_MS / 20;
      reasons.add((await b.check(login)).reason);
    }
    // Five seconds of refusals from the cache, one read tried a second.
    expect([...reasons]).toEqual(["blocked-cached"]);
    expect(shared.state.reads - reads).toBe(5);
    shared.state.down = false;
    now += RESET_CHECK_MS;
    expect((await b.check(login)).reason).toBe("within-limit");
  });

  it("are shared by the requests waiting where they may be, and made by each where not (Workers)", async () => {
    for (const requestScopedIo of [false, true]) {
      const shared = sharedStore();
      let now = Date.UTC(2026, 11, 1, 12, 0, 0);
      const limiter = createLimiter({
        store: shared.processStore(requestScopedIo),
        policy,
        clock: () => now,
      });
      expect((await limiter.check(login)).reason).toBe("within-limit");
      expect((await limiter.check(login)).reason).toBe("over-limit");
      now += RESET_CHECK_MS;
      const reads = shared.state.reads;
      const verdicts = await Promise.all(Array.from({ length: 5 }, () => limiter.check(login)));
      expect(verdicts.map((verdict) => verdict.action)).toEqual(Array(5).fill("block"));
      expect(shared.state.reads - reads).toBe(requestScopedIo ? 5 : 1);
    }
  });
});
