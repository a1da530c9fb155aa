/**
 * The memory store keeps a tuned path of its own (states written in place, a fixed window
 * counted in one step: src/stores/memory-in-place.ts, measured by bench/core.bench.ts) instead
 * of the shared three steps every other in-process store runs (`applyCounters`,
 * src/core/algorithms/apply.ts). Here both answer the same random requests, through both of
 * the memory store's entries (`applyOneSync` for one counter, `applySync` for several): rules
 * reloaded with another algorithm, window, limit, cost or mode between requests, requests up
 * to 1.5 s late, costs of 0 (a read), and idle gaps past every window.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { applyCounters, type CounterStates } from "../../src/core/algorithms/index.js";
import type { AlgorithmName, CounterSpec, WindowSpec } from "../../src/core/types.js";
import { memoryStore } from "../../src/stores/memory.js";

const START = Date.UTC(2026, 10, 30, 12, 0, 0);
const KEYS = 4;
const RULES = 3;

/**
 * States in a Map for the shared three steps. A rule reloaded with another algorithm starts
 * afresh, and its old state is gone once counted over, as the memory store drops it; a read (a
 * cost of 0) writes nothing, so it drops nothing either.
 */
function mapStates(): CounterStates {
  const kept = new Map<string, { algorithm: AlgorithmName; state: unknown }>();
  return {
    get: (counter) => {
      const found = kept.get(counter.key);
      if (found === undefined || found.algorithm === counter.algorithm) return found?.state;
      if (counter.cost > 0) kept.delete(counter.key);
      return undefined;
    },
    set: (counter, state) => {
      kept.set(counter.key, { algorithm: counter.algorithm, state });
    },
  };
}

const rule = fc.record({
  algorithm: fc.constantFrom<AlgorithmName>("fixed-window", "sliding-window", "token-bucket"),
  limit: fc.integer({ min: 1, max: 5 }),
  window: fc.constantFrom<WindowSpec>({ ms: 1_000 }, { ms: 60_000 }, { months: 1 }),
  cost: fc.integer({ min: 0, max: 3 }),
  mode: fc.constantFrom<"enforce" | "observe">("enforce", "enforce", "observe"),
});

const step = fc.record({
  /** Each counter under one of the history's rules: another rule on a key is a reload. */
  counters: fc.uniqueArray(
    fc.record({
      key: fc.integer({ min: 0, max: KEYS - 1 }),
      rule: fc.integer({ min: 0, max: RULES - 1 }),
    }),
    {
      minLength: 1,
      maxLength: 3,
      selector: (counter) => counter.key,
    },
  ),
  advanceMs: fc.oneof(
    fc.constant(0),
    fc.integer({ min: 1, max: 2_000 }),
    fc.integer({ min: 2_000, max: 40 * 86_400_000 }),
  ),
  /** Stamped this long before the latest time seen: a request that reaches the store late. */
  lateMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 1_500 })),
  /** One counter through `applySync` rather than `applyOneSync`. */
  asArray: fc.boolean(),
});

type Rule = typeof rule extends fc.Arbitrary<infer R> ? R : never;

function spec(key: number, counter: Rule): CounterSpec {
  return {
    key: `ip:${key}|test|global`,
    subject: `ip:${key}`,
    ruleId: "anonymous.global",
    namespace: "test",
    ...counter,
  };
}

describe("the memory store's tuned path", () => {
  it("answers every request as the shared three steps (applyCounters) do", () => {
    fc.assert(
      fc.property(
        fc.array(rule, { minLength: RULES, maxLength: RULES }),
        fc.array(step, { minLength: 1, maxLength: 80 }),
        (rules, steps) => {
          const store = memoryStore();
          const reference = mapStates();
          let latest = START;
          for (const { counters, advanceMs, lateMs, asArray } of steps) {
            latest += advanceMs;
            const now = latest - lateMs;
            const specs = counters.map(({ key, rule }) => spec(key, rules[rule] as Rule));
            const got =
              specs.length === 1 && !asArray
                ? [store.applyOneSync(specs[0] as CounterSpec, now)]
                : store.applySync(specs, now);
            expect(got).toEqual(applyCounters(specs, now, reference).states);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});
