import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ALGORITHMS, type Algorithm } from "../../src/core/algorithms/index.js";
import type { CounterSpec } from "../../src/core/types.js";
import { ENTRY_BYTES, ENTRY_STATE_FIELDS, memoryStore } from "../../src/stores/memory.js";

const NOW = Date.UTC(2026, 10, 30, 12, 0, 0);

function counter(key: string, limit: number, extra: Partial<CounterSpec> = {}): CounterSpec {
  return {
    key,
    subject: key.split("|")[0] as string,
    algorithm: "fixed-window",
    limit,
    window: { ms: 60_000 },
    cost: 1,
    mode: "enforce",
    ruleId: key,
    namespace: "test",
    ...extra,
  };
}

describe("memory store", () => {
  it("admits a request only when every enforcing counter allows it, and then counts it on all", () => {
    const store = memoryStore();
    const path = counter("ip:1|a|/api/export", 3);
    const global = counter("ip:1|a|global", 60);
    for (let i = 0; i < 3; i++)
      expect(store.applySync([path, global], NOW).every((s) => s.allowed)).toBe(true);
    const [pathState, globalState] = store.applySync([path, global], NOW);
    expect(pathState?.allowed).toBe(false);
    // The refused request counts on the counter that refused it, not on the global quota.
    expect(pathState?.count).toBe(4);
    expect(globalState?.count).toBe(3);
    expect(globalState?.allowed).toBe(true);
  });

  it("never spends a quota that a refused request did not use", () => {
    const store = memoryStore();
    const perMinute = counter("user:u|api|rate", 2);
    const monthly = counter("user:u|api|monthly", 1000, { window: { months: 1 } });
    for (let i = 0; i < 10; i++) store.applySync([perMinute, monthly], NOW);
    const [, monthlyState] = store.applySync([perMinute, monthly], NOW);
    expect(monthlyState?.count).toBe(2);
  });

  it("counts observe (shadow) counters without letting them refuse", () => {
    const store = memoryStore();
    const enforced = counter("ip:1|a|global", 100);
    const shadow = counter("ip:1|a|shadow", 1, { mode: "observe" });
    const first = store.applySync([enforced, shadow], NOW);
    const second = store.applySync([enforced, shadow], NOW);
    expect(first[1]?.allowed).toBe(true);
    expect(second[1]?.allowed).toBe(false);
    expect(second[0]?.count).toBe(2);
  });

  it("drops counters whose window has passed, with no timer", () => {
    const store = memoryStore();
    store.applySync([counter("ip:1|a|g", 1)], NOW);
    expect(store.applySync([counter("ip:1|a|g", 1)], NOW)[0]?.allowed).toBe(false);
    expect(store.applySync([counter("ip:1|a|g", 1)], NOW + 60_000)[0]?.allowed).toBe(true);
  });

  it("stays within maxBytes when keys are long, counting each key's length", () => {
    const store = memoryStore({ maxKeys: 100_000, maxBytes: 4_000_000 });
    const long = "x".repeat(65_536);
    for (let i = 0; i < 1_000; i++) {
      store.applySync([counter(`${i}|${long}`, 5)], NOW);
      expect(store.bytes).toBeLessThanOrEqual(4_000_000);
    }
    // Each takes 240 bytes and two a character: 30 fit in 4 MB.
    expect(store.size).toBe(30);
    expect(() => memoryStore({ maxBytes: 100 })).toThrow(/maxBytes/);
  });

  it("still counts a new key when counters seen twice could fill maxBytes", () => {
    const long = "x".repeat(100_000);
    const key = (i: number) => `busy-${String(i).padStart(2, "0")}|${long}`;
    // Room for exactly ten of them.
    const store = memoryStore({
      maxKeys: 100_000,
      maxBytes: 10 * (ENTRY_BYTES + 2 * key(0).length),
    });
    for (let i = 0; i < 20; i++) {
      for (let hit = 0; hit < 2; hit++) store.applySync([counter(key(i), 5)], NOW);
    }
    const newcomer = counter("newcomer", 2);
    const allowed = [0, 1, 2].map(() => store.applySync([newcomer], NOW)[0]?.allowed);
    expect(allowed).toEqual([true, true, false]);
  });

  it("stays within maxKeys", () => {
    const store = memoryStore({ maxKeys: 1000 });
    for (let i = 0; i < 50_000; i++) store.applySync([counter(`ip:${i}|a|g`, 10)], NOW);
    expect(store.size).toBeLessThanOrEqual(1000);
  });

  it("does not let a flood of fresh keys evict a busy attacker's counter", () => {
    const store = memoryStore({ maxKeys: 1000 });
    const attacker = counter("ip:6.6.6.6|a|g", 60);
    for (let i = 0; i < 200; i++) store.applySync([attacker], NOW);
    // 100,000 fresh subjects, 100x the store's capacity, while the attacker keeps hitting.
    for (let i = 0; i < 100_000; i++) {
      store.applySync([counter(`ip:${i}|a|g`, 60)], NOW);
      if (i % 500 === 0) store.applySync([attacker], NOW);
    }
    const [state] = store.applySync([attacker], NOW);
    expect(state?.allowed).toBe(false);
    expect(state?.count).toBeGreaterThan(200);
  });

  it("keeps an idle blocked counter through a flood of one-hit keys", () => {
    const store = memoryStore({ maxKeys: 1000 });
    const attacker = counter("ip:6.6.6.6|a|g", 60);
    for (let i = 0; i < 100; i++) store.applySync([attacker], NOW);
    for (let i = 0; i < 100_000; i++) store.applySync([counter(`ip:${i}|a|g`, 60)], NOW);
    expect(store.applySync([attacker], NOW)[0]?.allowed).toBe(false);
  });

  it("answers one counter through applyOneSync as the algorithm's three steps do", () => {
    const store = memoryStore();
    for (const algorithm of ["fixed-window", "sliding-window", "token-bucket"] as const) {
      const spec = counter(`ip:9|a|${algorithm}`, 5, { algorithm });
      const steps = ALGORITHMS[algorithm] as Algorithm<unknown>;
      let state: unknown;
      for (let i = 0; i < 40; i++) {
        const now = NOW + i * 4_000;
        const allowed = steps.allows(state, now, spec);
        state = steps.count(state, now, spec, allowed);
        expect(store.applyOneSync(spec, now)).toEqual(steps.describe(state, now, spec, allowed));
      }
    }
  });

  it("counts a returning key in its expired entry exactly as a new counter, without growing", () => {
    // Reference: the algorithms' three steps on a map that forgets a state once it expires.
    fc.assert(
      fc.property(
        fc.constantFrom("fixed-window", "sliding-window", "token-bucket"),
        fc.array(
          fc.record({
            keys: fc.uniqueArray(fc.integer({ min: 0, max: 3 }), { minLength: 1, maxLength: 3 }),
            advanceMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 150_000 })),
          }),
          { minLength: 1, maxLength: 60 },
        ),
        (algorithm, steps) => {
          const store = memoryStore();
          const steps3 = ALGORITHMS[algorithm] as Algorithm<unknown>;
          const reference = new Map<string, unknown>();
          const kept = Array.from({ length: 4 }, (_, i) =>
            counter(`ip:${i}|a|g`, 3, { algorithm }),
          );
          let now = NOW;
          for (const { keys, advanceMs } of steps) {
            now += advanceMs;
            const specs = keys.map((i) => kept[i] as CounterSpec);
            const got =
              specs.length === 1
                ? [store.applyOneSync(specs[0] as CounterSpec, now)]
                : store.applySync(specs, now);
            const states = specs.map((spec) => {
              const state = reference.get(spec.key);
              const live =
                state !== undefined && steps3.expiresAt(state, now, spec) > now ? state : undefined;
              return live;
            });
            const allowed = specs.map((spec, i) => steps3.allows(states[i], now, spec));
            const admitted = allowed.every(Boolean);
            const want = specs.map((spec, i) => {
              let state = states[i];
              if (admitted || !allowed[i]) {
                state = steps3.count(state, now, spec, allowed[i] as boolean);
                reference.set(spec.key, state);
              }
              return steps3.describe(state, now, spec, allowed[i] as boolean);
            });
            expect(got).toEqual(want);
          }
          expect(store.size).toBeLessThanOrEqual(4);
        },
      ),
    );
  });

  it("treats keys built anew for every request as the same counter", () => {
    // The limiter builds keys by concatenation: equal content must mean one counter, whatever
    // string object carries it.
    const store = memoryStore({ maxKeys: 100 });
    const parts = ["ip:", "203.0.113.7", "|a|", "global"];
    for (let i = 0; i < 10; i++) {
      const key = parts.join("").split("|").join("|");
      store.applySync([counter(key, 10)], NOW);
    }
    const [state] = store.applySync([counter(`${parts[0]}${parts[1]}|a|global`, 10)], NOW);
    expect(state).toMatchObject({ allowed: false, count: 11, remaining: 0 });
    expect(store.size).toBe(1);
  });

  it("starts a counter afresh when its rule changes algorithm (a policy reload)", () => {
    const store = memoryStore();
    const fixed = counter("ip:1|a|global", 3);
    for (let i = 0; i < 3; i++) store.applySync([fixed], NOW);
    expect(store.applyOneSync(fixed, NOW).allowed).toBe(false);
    // Same key, now a token bucket: the fixed window's state must not be read as a bucket's.
    const bucket = counter("ip:1|a|global", 3, { algorithm: "token-bucket" });
    const first = store.applyOneSync(bucket, NOW);
    expect(first.allowed).toBe(true);
    expect(first.remaining).toBe(2);
    // Both ways, and through the several-counters path too.
    const other = counter("ip:1|a|other", 10);
    const [back] = store.applySync([fixed, other], NOW);
    expect(back?.allowed).toBe(true);
    expect(back?.count).toBe(1);
    expect(store.size).toBe(2);
  });

  it("rejects a nonsensical size", () => {
    expect(() => memoryStore({ maxKeys: 0 })).toThrow(/maxKeys/);
  });
});

describe("memory store under a flood of fresh keys", () => {
  it("keeps inserting in constant time once full (eviction never rescans what it removed)", () => {
    const store = memoryStore({ maxKeys: 100_000 });
    for (let i = 0; i < 100_000; i++) store.applySync([counter(`ip:fill${i}|a|g`, 10)], NOW);
    // 300,000 more fresh subjects through a full store: each insert evicts one.
    const started = performance.now();
    for (let i = 0; i < 300_000; i++) store.applySync([counter(`ip:flood${i}|a|g`, 10)], NOW);
    const elapsed = performance.now() - started;
    expect(store.size).toBeLessThanOrEqual(100_000);
    // A scan from the front of the map on every eviction made this take minutes; constant-time
    // eviction takes well under a second on this machine, even when it is busy.
    expect(elapsed).toBeLessThan(5_000);
  });
});

describe("memory store: entry layout", () => {
  it("declares every algorithm's state fields when it creates an entry", () => {
    const declared: readonly string[] = ENTRY_STATE_FIELDS;
    for (const [name, algorithm] of Object.entries(ALGORITHMS) as [string, Algorithm<unknown>][]) {
      const state = algorithm.count(undefined, NOW, counter("k", 5), true) as object;
      expect({
        name,
        fields: Object.keys(state).filter((field) => !declared.includes(field)),
      }).toEqual({ name, fields: [] });
    }
  });
});

describe("memory store: counters in one call", () => {
  it("counts afresh a counter whose entry another counter's insert evicted in the same call", () => {
    const store = memoryStore({ maxKeys: 3 });
    const evicted = counter("ip:1|a|global", 10);
    expect(store.applyOneSync(evicted, NOW).count).toBe(1);
    store.applyOneSync(counter("ip:0|a|global", 10), NOW);
    store.applyOneSync(counter("ip:2|a|global", 10), NOW);
    // The new key's insert evicts the oldest entry, which is the second counter's own.
    const [, state] = store.applySync([counter("ip:3|a|global", 10), evicted], NOW);
    expect(state?.count).toBe(1);
    // It was counted in a live entry: the next request sees that count, not a third one.
    expect(store.applyOneSync(evicted, NOW).count).toBe(2);
    expect(store.size).toBe(3);
  });

  it("never counts on another store's entry when one counter goes to two stores", () => {
    const first = memoryStore();
    const second = memoryStore();
    const shared = counter("ip:9|a|global", 10);
    for (let i = 0; i < 3; i++) first.applyOneSync(shared, NOW);
    expect(second.applyOneSync(shared, NOW).count).toBe(1);
    expect(first.applyOneSync(shared, NOW).count).toBe(4);
    expect(second.applySync([shared], NOW)[0]?.count).toBe(2);
  });

  it("leaves a caller's frozen counter alone", () => {
    const store = memoryStore();
    const frozen = Object.freeze(counter("ip:8|a|global", 10));
    expect(store.applyOneSync(frozen, NOW).count).toBe(1);
    expect(store.applyOneSync(frozen, NOW).count).toBe(2);
  });
});
