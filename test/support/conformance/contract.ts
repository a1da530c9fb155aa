/**
 * The store contract (`Store` in src/core/types.ts), written once as rules that every store
 * must keep, run over each target by test/conformance/*.test.ts.
 */
import { describe, expect, it } from "vitest";
import type {
  AlgorithmName,
  CounterSpec,
  CounterState,
  ResetsSince,
  Store,
} from "../../../src/core/types.js";
import { windowEndOf, windowIndexAt } from "../../../src/core/windows.js";
import type { Target } from "./targets.js";

const SECOND = 1000;

/** A time well ahead of the real clock, so that no store's own expiry meets the test's time. */
export function virtualStart(): number {
  return (Math.floor(Date.now() / 60_000) + 24 * 60) * 60_000;
}

export function spec(key: string, limit: number, extra: Partial<CounterSpec> = {}): CounterSpec {
  const subject = key.split("|")[0] as string;
  return {
    key,
    subject,
    algorithm: "fixed-window",
    limit,
    window: { ms: 10 * SECOND },
    cost: 1,
    mode: "enforce",
    ruleId: key.split("|")[2] ?? key,
    namespace: "t",
    ...extra,
  };
}

/** The index of the window a store counted a request in, read from its answer. */
export function countedWindow(counter: CounterSpec, state: CounterState): number {
  const ending = windowIndexAt(counter.window, state.resetAt - 1);
  return counter.algorithm === "sliding-window" ? ending - 1 : ending;
}

/** A store's log of resets, which its `followResets` reads (both Redis stores keep one). */
interface ResetLog {
  resetsSince(mark: string | undefined): Promise<ResetsSince>;
}

/** The contract's rules over the target `current()` returns (started by `describeConformance`). */
export function describeStoreContract(current: () => Target): void {
  const one = async (): Promise<Store> => (await current().stores(1))[0] as Store;

  describe("the store contract", () => {
    it("admits a request only when every enforcing counter allows it, and then counts it on all", async () => {
      const store = await one();
      const t = virtualStart();
      const path = spec("ip:1|t|path", 2);
      const global = spec("ip:1|t|global", 10);
      for (let i = 0; i < 2; i++) {
        const states = await store.apply([path, global], t + i);
        expect(states.map((state) => state.allowed)).toEqual([true, true]);
      }
      const [pathState, globalState] = await store.apply([path, global], t + 2);
      expect(pathState?.allowed).toBe(false);
      // A refused request counts only on the counter that refused it.
      expect(globalState?.count).toBe(2);
      // A store that gives back increments in the background (DynamoDB's refunds) is read once
      // they have landed: until then a count may be one too high, the safe direction.
      await (store as { settled?: () => Promise<void> }).settled?.();
      const [after] = await store.apply([{ ...global, cost: 0 }], t + 3);
      expect(after?.count).toBe(2);
    });

    it("reads a counter at cost 0 and writes nothing: a request stamped before the read counts as if it were not there", async () => {
      const store = await one();
      const t = virtualStart();
      const bucket = spec("ip:9|t|global", 10, { algorithm: "token-bucket" });
      const [read] = await store.apply([{ ...bucket, cost: 0 }], t + 5 * SECOND);
      expect(read?.remaining).toBe(10);
      // Had the read stored the bucket's arrival time (t + 5 s), this request would hold 6 tokens.
      const [counted] = await store.apply([bucket], t);
      expect(counted?.count).toBe(1);
    });

    it("always counts observe (shadow) counters, which never refuse a request", async () => {
      const store = await one();
      const t = virtualStart();
      const enforced = spec("ip:2|t|global", 10);
      const shadow = spec("ip:2|t|shadow", 1, { mode: "observe" });
      await store.apply([enforced, shadow], t);
      const [enforcedState, shadowState] = await store.apply([enforced, shadow], t + 1);
      expect(enforcedState?.allowed).toBe(true);
      expect(enforcedState?.count).toBe(2);
      expect(shadowState?.allowed).toBe(false);
      expect(shadowState?.count).toBe(2);
    });

    it("counts a request's cost in units", async () => {
      const store = await one();
      const t = virtualStart();
      const counter = spec("ip:3|t|global", 10, { cost: 4 });
      expect((await store.apply([counter], t))[0]?.count).toBe(4);
      expect((await store.apply([counter], t + 1))[0]?.count).toBe(8);
      const [refused] = await store.apply([counter], t + 2);
      expect(refused?.allowed).toBe(false);
    });

    for (const algorithm of ["fixed-window", "sliding-window"] as const) {
      it(`${algorithm}: a request counted late never rewinds a newer window`, async () => {
        const store = await one();
        const t = virtualStart();
        const counter = spec(`ip:4|t|${algorithm}`, 3, { algorithm });
        const next = t + 10 * SECOND;
        const admittedIn = new Map<number, number>();
        const send = async (now: number) => {
          const [state] = await store.apply([counter], now);
          if (state?.allowed) {
            const window = countedWindow(counter, state);
            admittedIn.set(window, (admittedIn.get(window) ?? 0) + 1);
          }
          return state;
        };
        for (let i = 0; i < 3; i++) await send(next + 100 + i);
        // Stamped 5 ms before the window the counter is in: a slow token check, a clock behind.
        await send(next - 5);
        for (let i = 0; i < 3; i++) await send(next + 200 + i);
        const newer = windowIndexAt(counter.window, next);
        expect(admittedIn.get(newer)).toBe(3);
        for (const admitted of admittedIn.values()) expect(admitted).toBeLessThanOrEqual(3);
        // The newer window's count was not lost: nothing more passes in it.
        const [after] = await store.apply([{ ...counter, cost: 0 }], next + 300);
        expect(after?.count).toBeGreaterThanOrEqual(3);
      });
    }

    it("two callers whose clocks are 2 ms apart admit the limit once at a window's edge", async () => {
      const [ahead, behind] = (await current().stores(2)) as [Store, Store];
      const t = virtualStart();
      const counter = spec("ip:5|t|global", 5);
      const edge = t + 10 * SECOND;
      let admittedAfterEdge = 0;
      // Around the edge, the callers alternate; the one behind still believes it is before it.
      for (let i = 0; i < 30; i++) {
        const now = edge - 10 + i;
        const [fromAhead] = await ahead.apply([counter], now);
        const [fromBehind] = await behind.apply([counter], now - 2);
        for (const state of [fromAhead, fromBehind]) {
          if (
            state?.allowed &&
            countedWindow(counter, state) >= windowIndexAt(counter.window, edge)
          ) {
            admittedAfterEdge++;
          }
        }
      }
      expect(admittedAfterEdge).toBe(5);
    });

    it("a caller whose clock is 90 s behind real time counts exactly, and its counters are kept", async () => {
      const store = await one();
      const counter = spec("ip:6|t|global", 5, { window: { ms: 60 * SECOND } });
      let now = 0;
      let last = 0;
      const calledIn = new Map<number, number>();
      const admittedIn = new Map<number, number>();
      const tally = (into: Map<number, number>, window: number) =>
        into.set(window, (into.get(window) ?? 0) + 1);
      for (let i = 0; i < 20; i++) {
        now = Date.now() - 90 * SECOND;
        const [state] = await store.apply([counter], now);
        if (!state) throw new Error("the store answered no state for the counter");
        // The window the store counted in (a store may window by its own clock, as the
        // Durable Object does).
        last = countedWindow(counter, state);
        tally(calledIn, last);
        if (state.allowed) tally(admittedIn, last);
      }
      // The minute may turn during the 20 calls on a loaded machine: in each window the store
      // counted in, the first five passed, and no more.
      expect(calledIn.size).toBeLessThanOrEqual(2);
      for (const [window, calls] of calledIn) {
        expect(admittedIn.get(window) ?? 0).toBe(Math.min(5, calls));
      }
      const [read] = await store.apply([{ ...counter, cost: 0 }], now);
      if (read && countedWindow(counter, read) === last) {
        expect(read.count).toBeGreaterThanOrEqual(admittedIn.get(last) ?? 0);
      }
    });

    it("a counter's state under another window length is not read as this rule's (a reload)", async () => {
      const store = await one();
      const t = virtualStart();
      const hourly = spec("ip:7|t|global", 5, { window: { ms: 3_600_000 } });
      const tenSeconds = spec("ip:7|t|global", 5);
      for (let i = 0; i < 5; i++) await store.apply([hourly], t + i);
      // The rule changed to 10 s windows: its first window starts empty, and later ones too.
      const states: CounterState[] = [];
      for (let i = 0; i < 7; i++) {
        states.push(...(await store.apply([tenSeconds], t + 10 * SECOND + i)));
      }
      expect(states.filter((state) => state.allowed)).toHaveLength(5);
      const later = await store.apply([tenSeconds], t + 20 * SECOND);
      expect(later[0]?.allowed).toBe(true);
      expect(later[0]?.resetAt).toBe(
        windowEndOf(tenSeconds.window, windowIndexAt(tenSeconds.window, t + 20 * SECOND)),
      );
    });

    it("a token bucket admits a burst of its limit, then at its rate", async () => {
      const store = await one();
      const t = virtualStart();
      const bucket = spec("ip:8|t|bucket", 4, { algorithm: "token-bucket" as AlgorithmName });
      const burst = [];
      for (let i = 0; i < 6; i++) burst.push((await store.apply([bucket], t))[0]?.allowed);
      expect(burst).toEqual([true, true, true, true, false, false]);
      // 10 s for 4 tokens: one more every 2.5 s; a caller behind by 100 ms gets none earlier.
      expect((await store.apply([bucket], t + 2400))[0]?.allowed).toBe(false);
      expect((await store.apply([bucket], t + 2600))[0]?.allowed).toBe(true);
      expect((await store.apply([bucket], t + 2500))[0]?.allowed).toBe(false);
    });

    it("forgets a request's counters on reset, where the store can reset", async ({ skip }) => {
      if (!current().canReset) skip();
      const store = await one();
      const t = virtualStart();
      const counter = spec("ip:9|t|global", 2);
      for (let i = 0; i < 3; i++) await store.apply([counter], t + i);
      // At the caller's time, as `apply`: a store that keeps windows apart forgets those around it.
      await store.reset?.([counter], t + 3);
      const [state] = await store.apply([counter], t + 10);
      expect(state?.allowed).toBe(true);
      expect(state?.count).toBe(1);
    });

    it("tells another process which counters were reset since its mark, where it keeps a log", async ({
      skip,
    }) => {
      const [here, there] = (await current().stores(2)) as [Store, Store & Partial<ResetLog>];
      if (here.reset === undefined || there.resetsSince === undefined) skip();
      const read = (mark: string | undefined) => (there as ResetLog).resetsSince(mark);
      const first = await read(undefined);
      expect(first.keys).toBe("all");
      expect(await read(first.mark)).toEqual({ mark: first.mark, keys: [] });
      const counters = [spec("ip:11|t|global", 2), spec("ip:12|t|global", 2)];
      await here.reset?.(counters);
      const after = await read(first.mark);
      expect(after.keys).toEqual(counters.map((counter) => counter.key));
      expect(await read(after.mark)).toEqual({ mark: after.mark, keys: [] });
      // A mark the log does not know (another server's, a flushed one's) cannot tell: all.
      expect((await read("elsewhere/1")).keys).toBe("all");
    });
  });
}
