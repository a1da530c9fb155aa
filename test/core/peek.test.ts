/**
 * `limiter.peek`: each matched rule's limit, remaining and reset as `check` reports them,
 * counting nothing, on the memory store (in this process, and behind a switch that makes it a
 * "remote" store the limiter reaches with a budget, as local-fallback.test.ts does).
 */
import { describe, expect, it } from "vitest";
import { hybridCounting } from "../../src/core/hybrid-counting.js";
import type { CounterSpec, CounterState, Store } from "../../src/core/types.js";
import { createLimiter } from "../../src/limiter.js";
import { definePolicy } from "../../src/policy/load.js";
import type { PolicyInput } from "../../src/policy/schema.js";
import { MemoryStore } from "../../src/stores/memory.js";

const T0 = Date.UTC(2026, 10, 30, 12, 0, 10);
const ALGORITHMS = ["fixed-window", "sliding-window", "token-bucket"] as const;

/** The memory store reached as a remote store is (no `applySync`), with a switch to fail it. */
function remote(inner = new MemoryStore()) {
  let down = false;
  const calls: CounterSpec[][] = [];
  const store: Store = {
    name: "remote-memory",
    async apply(counters: readonly CounterSpec[], now: number): Promise<CounterState[]> {
      await new Promise((resolve) => setImmediate(resolve));
      if (down) throw new Error("store is down");
      calls.push([...counters]);
      return inner.applySync(counters, now);
    },
  };
  return { store, inner, calls, setDown: (value: boolean) => (down = value) };
}

function setup(input: PolicyInput, store: Store = new MemoryStore()) {
  let clock = T0;
  const decisions: string[] = [];
  const limiter = createLimiter({
    policy: definePolicy(input),
    store,
    clock: () => clock,
    onStoreError: false,
    onDecision: (verdict) => decisions.push(verdict.reason),
  });
  return { limiter, decisions, advance: (ms: number) => (clock += ms) };
}

const client = { ip: "203.0.113.7", path: "/api/search" };

describe("limiter.peek on the memory store", () => {
  for (const algorithm of ALGORITHMS) {
    it(`${algorithm}: after N checks reports remaining = limit - N and the reset the last check reported`, async () => {
      const { limiter } = setup({
        tiers: { anonymous: { global: { limit: 10, window: "60s", algorithm } } },
      });
      let last = await limiter.check(client);
      for (let i = 1; i < 4; i++) last = await limiter.check(client);
      const peek = await limiter.peek(client);
      expect(peek.reason).toBe("matched");
      expect(peek.subject).toBe("ip:203.0.113.7");
      expect(peek.rules).toEqual([
        {
          rule: "anonymous.global",
          namespace: "anonymous",
          limit: 10,
          remaining: 6,
          reset: last.reset,
          shadow: false,
        },
      ]);
      expect(last.remaining).toBe(6);
    });

    it(`${algorithm}: 100 peeks change nothing, neither the count nor the store's entries`, async () => {
      const store = new MemoryStore();
      const { limiter, decisions } = setup(
        { tiers: { anonymous: { global: { limit: 10, window: "60s", algorithm } } } },
        store,
      );
      for (let i = 0; i < 3; i++) await limiter.check(client);
      for (let i = 0; i < 100; i++) await limiter.peek(client);
      // A subject never counted: a peek makes no entry for it.
      for (let i = 0; i < 100; i++) await limiter.peek({ ...client, ip: `198.51.100.${i}` });
      expect(store.size).toBe(1);
      expect(decisions).toHaveLength(3);
      expect((await limiter.check(client)).remaining).toBe(6);
      const fresh = await limiter.peek({ ...client, ip: "198.51.100.1" });
      expect(fresh.rules[0]?.remaining).toBe(10);
    });
  }

  it("reports every matched rule, shadow rules too, each with its own numbers", async () => {
    const { limiter } = setup({
      tiers: {
        anonymous: {
          global: { limit: 50, window: "60s" },
          paths: { "/api/search": { limit: 3, window: "10s", shadow: true } },
        },
      },
    });
    for (let i = 0; i < 2; i++) await limiter.check(client);
    const peek = await limiter.peek(client);
    expect(peek.rules.map(({ rule, remaining, shadow }) => ({ rule, remaining, shadow }))).toEqual([
      { rule: "anonymous.global", remaining: 48, shadow: false },
      { rule: "anonymous.path./api/search", remaining: 1, shadow: true },
    ]);
  });

  it("a refused subject reads remaining 0 until its window ends, and counts no attempt", async () => {
    const { limiter, advance } = setup({
      tiers: { anonymous: { global: { limit: 2, window: "60s" } } },
    });
    for (let i = 0; i < 3; i++) await limiter.check(client);
    const peek = await limiter.peek(client);
    expect(peek.rules[0]?.remaining).toBe(0);
    expect(peek.rules[0]?.reset).toBe(Math.ceil((Math.floor(T0 / 60_000) + 1) * 60));
    advance(60_000);
    expect((await limiter.peek(client)).rules[0]?.remaining).toBe(2);
  });

  it("names why no rule applies: allowlisted, denylisted, no rule", async () => {
    const { limiter } = setup({
      allowlist: ["192.0.2.0/24"],
      denylist: ["198.51.100.0/24"],
      tiers: { anonymous: { paths: { "/api/": { limit: 5 } } } },
    });
    expect(await limiter.peek({ ip: "192.0.2.1", path: "/api/x" })).toMatchObject({
      reason: "allowlisted",
      rules: [],
    });
    expect(await limiter.peek({ ip: "198.51.100.1", path: "/api/x" })).toMatchObject({
      reason: "denylisted",
      rules: [],
    });
    expect(await limiter.peek({ ip: "203.0.113.7", path: "/" })).toMatchObject({
      reason: "no-rule",
      rules: [],
    });
  });
});

describe("limiter.peek on a remote store", () => {
  it("sends the request's counters at cost 0 in one call, and leaves the block cache alone", async () => {
    const { store, calls } = remote();
    const { limiter } = setup(
      { tiers: { anonymous: { global: { limit: 2, window: "60s" } } } },
      store,
    );
    for (let i = 0; i < 3; i++) await limiter.check(client);
    expect(limiter.blockCacheHits).toBe(0);
    calls.length = 0;
    const peek = await limiter.peek(client);
    expect(calls.map((call) => call.map((counter) => counter.cost))).toEqual([[0]]);
    expect(peek.rules[0]?.remaining).toBe(0);
    // The block the cache holds answers the next check, as before the peek.
    await limiter.check(client);
    expect(limiter.blockCacheHits).toBe(1);
  });

  it("when the store fails: resolves with the cause, a local rule as counted here, others unknown", async () => {
    const { store, setDown } = remote();
    const { limiter } = setup(
      {
        tiers: {
          anonymous: {
            global: { limit: 10, window: "60s", failMode: "local" },
            paths: { "/api/": { limit: 5, window: "60s", failMode: "open" } },
          },
        },
      },
      store,
    );
    await limiter.check(client);
    setDown(true);
    for (let i = 0; i < 3; i++)
      expect((await limiter.check(client)).reason).toBe("store-failed-local");
    const before = limiter.localCounting.decisions;
    const peek = await limiter.peek(client);
    expect(peek.storeError).toBe("store is down");
    const byRule = Object.fromEntries(peek.rules.map((rule) => [rule.rule, rule]));
    // What this process holds the rule to while the store is down: its 3 local admissions.
    expect(byRule["anonymous.global"]).toMatchObject({ remaining: 7 });
    expect(byRule["anonymous.global"]?.countUnknown).toBeUndefined();
    expect(byRule["anonymous.path./api/"]).toMatchObject({ remaining: 0, countUnknown: true });
    expect(limiter.localCounting.decisions).toBe(before);
  });

  it("hybrid: reads the store's count, reserving nothing and spending nothing held", async () => {
    const { store, inner, calls } = remote();
    const { limiter } = setup(
      { tiers: { anonymous: { global: { limit: 100, window: "60s", counting: "hybrid" } } } },
      hybridCounting(store),
    );
    // A subject never counted: the peek asks the store and reserves nothing for it.
    const fresh = await limiter.peek(client);
    expect(fresh.rules[0]?.remaining).toBe(100);
    expect(inner.size).toBe(0);
    expect(calls.flat().map((counter) => counter.cost)).toEqual([0]);
    const read = calls[0] as CounterSpec[];
    const stored = () => (inner.applySync(read, T0)[0] as CounterState).count;
    // Counted: the first request reserves its own cost, the second a share of the window ahead.
    await limiter.check(client);
    await limiter.check(client);
    const reserved = stored();
    expect(reserved).toBeGreaterThan(2);
    calls.length = 0;
    const peek = await limiter.peek(client);
    // The store's count: what every process reserved, spent or not.
    expect(peek.rules[0]?.remaining).toBe(100 - reserved);
    expect(calls.flat().map((counter) => counter.cost)).toEqual([0]);
    expect(stored()).toBe(reserved);
  });
});
