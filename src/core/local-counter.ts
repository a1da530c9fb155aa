/**
 * Counts in this process while the store is failed (see local-fallback.ts): the algorithms the
 * memory store runs, over a bounded cache of states, applied as the `Store` contract says
 * (`applyCounters`, core/algorithms/apply.ts).
 */
import { type AppliedCounters, applyCounters } from "./algorithms/apply.js";
import { ALGORITHMS } from "./algorithms/table.js";
import { GenerationalCache } from "./generational-cache.js";
import type { AlgorithmName, CounterSpec, CounterState } from "./types.js";

interface LocalState {
  readonly algorithm: AlgorithmName;
  readonly state: unknown;
}

export class LocalCounter {
  /**
   * Bounded: at most twice `keysPerGeneration` counters. A counter hit on every request stays
   * in the young generation; a flood of new subjects can push out one that has been idle for a
   * whole generation, which then counts afresh (see docs/policy.md, "When the store fails").
   */
  readonly #states: GenerationalCache<LocalState>;

  constructor(keysPerGeneration: number) {
    this.#states = new GenerationalCache(keysPerGeneration);
  }

  /** Counters held (a key in both generations counted twice). */
  get size(): number {
    return this.#states.size;
  }

  /** Applies one request's counters; returns their states and whether it was admitted. */
  apply(counters: readonly CounterSpec[], now: number): AppliedCounters {
    return applyCounters(counters, now, {
      get: (counter) => {
        const found = this.#states.get(counter.key);
        // A rule that changed algorithm (a reload) starts afresh.
        return found?.algorithm === counter.algorithm ? found.state : undefined;
      },
      set: (counter, state) => {
        this.#states.set(counter.key, { algorithm: counter.algorithm, state });
      },
    });
  }

  /**
   * The states `apply` would describe for these counters, counting nothing (a peek while the
   * store is failed, core/peek.ts). A counter read is kept as recently used, as a count is.
   */
  peek(counters: readonly CounterSpec[], now: number): CounterState[] {
    return counters.map((counter) => {
      const found = this.#states.get(counter.key);
      const state = found?.algorithm === counter.algorithm ? found.state : undefined;
      const algorithm = ALGORITHMS[counter.algorithm];
      return algorithm.describe(state, now, counter, algorithm.allows(state, now, counter));
    });
  }
}
