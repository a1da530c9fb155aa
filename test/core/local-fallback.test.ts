/**
 * `failMode: local` in the core: a store that fails is replaced, rule by rule, by a count in
 * this process against the rule's limit, and what was admitted meanwhile is paid to the store
 * with the next call for the same counter. The "remote" store here is the real memory store
 * behind a switch that makes its calls fail, as a store that is down does; the limiter sees it
 * as a remote store (no `applySync`), so decisions take the remote path with its budget.
 */
import { describe, expect, it } from "vitest";
import type { CounterSpec, CounterState, Store } from "../../src/core/types.js";
import { createLimiter } from "../../src/limiter.js";
import { definePolicy } from "../../src/policy/load.js";
import type { PolicyInput } from "../../src/policy/schema.js";
import { MemoryStore } from "../../src/stores/memory.js";

const T0 = Date.UTC(2026, 10, 30, 12, 0, 10);

/** The memory store as a remote one that can be switched off; records the costs it was sent. */
function switchedStore() {
  const inner = new MemoryStore();
  const sent: { key: string; cost: number }[] = [];
  let down = false;
  const store: Store = {
    name: "switched",
    apply(counters: readonly CounterSpec[], now: number): Promise<CounterState[]> {
      if (down) return Promise.reject(new Error("store is down"));
      for (const counter of counters) sent.push({ key: counter.key, cost: counter.cost });
      return inner.apply(counters, now);
    },
  };
  return {
    store,
    inner,
    sent,
    setDown: (value: boolean) => {
      down = value;
    },
  };
}

function setup(input: PolicyInput) {
  const switched = switchedStore();
  let clock = T0;
  const limiter = createLimiter({
    policy: definePolicy(input),
    store: switched.store,
    clock: () => clock,
    onStoreError: false,
    blockCache: false,
  });
  const check = async (ip: string, path = "/") => {
    const verdict = await limiter.check({ ip, path });
    return `${verdict.status} ${verdict.reason}`;
  };
  return { ...switched, limiter, check, advance: (ms: number) => (clock += ms) };
}

/** The count the memory store holds for the one counter of `ip` (an observer of cost 0). */
function storedCount(
  inner: MemoryStore,
  key: string,
  algorithm: CounterSpec["algorithm"],
  limit: number,
  windowMs: number,
  now: number,
): number {
  const [state] = inner.applySync(
    [
      {
        key,
        subject: key.split("|")[0] as string,
        algorithm,
        limit,
        window: { ms: windowMs },
        cost: 0,
        mode: "observe",
        ruleId: "anonymous.global",
        namespace: "anonymous",
      },
    ],
    now,
  );
  return (state as CounterState).count;
}

describe("failMode: local", () => {
  it("counts a rule in the process against its limit while the store is down", async () => {
    const { check, setDown, limiter } = setup({ tiers: { anonymous: { global: 3 } } });
    setDown(true);
    const answers: string[] = [];
    for (let i = 0; i < 5; i++) answers.push(await check("198.51.100.1"));
    expect(answers).toEqual([
      "200 store-failed-local",
      "200 store-failed-local",
      "200 store-failed-local",
      "429 store-failed-local",
      "429 store-failed-local",
    ]);
    // Another subject has a count of its own.
    expect(await check("198.51.100.2")).toBe("200 store-failed-local");
    expect(limiter.localCounting).toMatchObject({ decisions: 6, owedKeys: 2 });
  });

  it("tells the client the local count in the rate-limit headers", async () => {
    const { limiter, setDown } = setup({ tiers: { anonymous: { global: 3 } } });
    setDown(true);
    await limiter.check({ ip: "198.51.100.3", path: "/" });
    const second = await limiter.check({ ip: "198.51.100.3", path: "/" });
    expect(second.headers["x-ratelimit-remaining"]).toBe("1");
    expect(second.storeError).toMatch(/store is down/);
  });

  it("pays what it admitted to the store with the next call, so the window has no second limit", async () => {
    const { check, setDown, inner, sent, limiter } = setup({
      tiers: { anonymous: { global: 5 } },
    });
    expect(await check("198.51.100.4")).toBe("200 within-limit");
    setDown(true);
    for (let i = 0; i < 3; i++) expect(await check("198.51.100.4")).toBe("200 store-failed-local");
    setDown(false);
    // The store had 1; 3 more were admitted here: the next request carries them (cost 1 + 3).
    expect(await check("198.51.100.4")).toBe("200 within-limit");
    expect(sent.at(-1)?.cost).toBe(4);
    expect(await check("198.51.100.4")).toBe("429 over-limit");
    expect(sent.at(-1)?.cost).toBe(1);
    const key = sent[0]?.key as string;
    // 1 before + 3 local + 1 after + 1 refused attempt (a fixed window records it).
    expect(storedCount(inner, key, "fixed-window", 5, 60_000, T0)).toBe(6);
    expect(limiter.localCounting.owedKeys).toBe(0);
  });

  it("refuses the paying request when the debt leaves no room, and still records the debt", async () => {
    const { check, setDown, inner, sent } = setup({ tiers: { anonymous: { global: 3 } } });
    setDown(true);
    for (let i = 0; i < 3; i++) await check("198.51.100.5");
    setDown(false);
    expect(await check("198.51.100.5")).toBe("429 over-limit");
    expect(storedCount(inner, sent[0]?.key as string, "fixed-window", 3, 60_000, T0)).toBe(4);
  });

  it("keeps the debt owed while the store fails again, and pays it once", async () => {
    const { check, setDown, sent } = setup({ tiers: { anonymous: { global: 10 } } });
    setDown(true);
    await check("198.51.100.6");
    await check("198.51.100.6");
    // A call that fails takes the debt with it and gives it back.
    await check("198.51.100.6");
    setDown(false);
    await check("198.51.100.6");
    await check("198.51.100.6");
    expect(sent.map((call) => call.cost)).toEqual([4, 1]);
  });

  it("owes nothing from a window that is over", async () => {
    const { check, setDown, sent, advance } = setup({ tiers: { anonymous: { global: 10 } } });
    setDown(true);
    await check("198.51.100.7");
    advance(60_000);
    setDown(false);
    await check("198.51.100.7");
    expect(sent.map((call) => call.cost)).toEqual([1]);
  });

  it("owes a sliding window's previous units at the weight the store gives them", async () => {
    const { check, setDown, sent, advance } = setup({
      tiers: { anonymous: { global: { limit: 100, algorithm: "sliding-window" } } },
    });
    setDown(true);
    for (let i = 0; i < 10; i++) await check("198.51.100.8");
    // T0 is 10 s into its minute: the next minute at 45 s weighs the previous one at 0.25.
    advance(50_000 + 45_000);
    setDown(false);
    await check("198.51.100.8");
    expect(sent.map((call) => call.cost)).toEqual([1 + Math.ceil(10 * 0.25)]);
  });

  it("lets a token bucket's debt drain at the bucket's rate", async () => {
    const { check, setDown, sent, advance } = setup({
      tiers: { anonymous: { global: { limit: 60, algorithm: "token-bucket" } } },
    });
    setDown(true);
    for (let i = 0; i < 30; i++) await check("198.51.100.9");
    // 60 a minute: 10 s later, 10 of the 30 units have drained.
    advance(10_000);
    setDown(false);
    await check("198.51.100.9");
    expect(sent.map((call) => call.cost)).toEqual([1 + 20]);
  });

  it("counts only the local rules: open ones are not counted, closed ones answer 503", async () => {
    const { check, setDown } = setup({
      failClosed: ["/admin/"],
      tiers: {
        anonymous: {
          global: { limit: 1, failMode: "open" },
          paths: { "/api/": 2, "/admin/": 100 },
        },
      },
    });
    setDown(true);
    const answers: string[] = [];
    for (let i = 0; i < 3; i++) answers.push(await check("198.51.100.10", "/api/x"));
    expect(answers).toEqual([
      "200 store-failed-local",
      "200 store-failed-local",
      "429 store-failed-local",
    ]);
    expect(await check("198.51.100.10", "/other")).toBe("200 store-failed-open");
    expect(await check("198.51.100.10", "/admin/users")).toBe("503 store-failed-closed");
  });

  it("challenges within the band and blocks beyond it, as the store would", async () => {
    const { check, setDown } = setup({
      tiers: { anonymous: { global: { limit: 2, action: "challenge", challengeBand: 2 } } },
    });
    setDown(true);
    const answers: string[] = [];
    for (let i = 0; i < 5; i++) answers.push(await check("198.51.100.11"));
    expect(answers).toEqual([
      "200 store-failed-local",
      "200 store-failed-local",
      "302 store-failed-local",
      "429 store-failed-local",
      "429 store-failed-local",
    ]);
  });

  it("holds bounded memory: at most maxKeys counters and debts", async () => {
    const switched = switchedStore();
    switched.setDown(true);
    const limiter = createLimiter({
      policy: definePolicy({ tiers: { anonymous: { global: 5 } } }),
      store: switched.store,
      clock: () => T0,
      onStoreError: false,
      localFallback: { maxKeys: 100 },
    });
    for (let i = 0; i < 1000; i++) {
      await limiter.check({ ip: `10.20.${i >> 8}.${i & 255}`, path: "/" });
    }
    const status = limiter.localCounting;
    expect(status.keys).toBeLessThanOrEqual(100);
    expect(status.owedKeys).toBeLessThanOrEqual(100);
    expect(status.droppedDebts).toBe(900);
  });
});
