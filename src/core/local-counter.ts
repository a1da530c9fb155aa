/**
 * Counts in this process while the store is failed (see local-fallback.ts): the algorithms the
 * memory store runs, over a bounded cache of states, applied as the `Store` contract says (a
 * request admitted when every enforcing counter admits it; counted on every counter when
 * admitted, on the refusing ones when refused, on observing ones always).
 */
import { ALGORITHMS } from "./algorithms/index.js";
import { GenerationalCache } from "./generational-cache.js";
import type { AlgorithmName, CounterSpec, CounterState } from "./types.js";

interface LocalState {
  readonly algorithm: AlgorithmName;
  // biome-ignore lint/suspicious/noExplicitAny: each algorithm's own state, opaque here.
  state: any;
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
  apply(
    counters: readonly CounterSpec[],
    now: number,
  ): { readonly states: CounterState[]; readonly admitted: boolean } {
    const held = counters.map((counter) => {
      const found = this.#states.get(counter.key);
      // A rule that changed algorithm (a reload) starts afresh.
      return found?.algorithm === counter.algorithm ? found : undefined;
    });
    const allowed = counters.map((counter, i) =>
      ALGORITHMS[counter.algorithm].allows(held[i]?.state, now, counter),
    );
    const admitted = counters.every((counter, i) => counter.mode !== "enforce" || allowed[i]);
    const states = counters.map((counter, i) => {
      const algorithm = ALGORITHMS[counter.algorithm];
      const ok = allowed[i] as boolean;
      let entry = held[i];
      if (admitted || !ok || counter.mode === "observe") {
        const state = algorithm.count(entry?.state, now, counter, ok);
        if (entry === undefined) {
          entry = { algorithm: counter.algorithm, state };
          this.#states.set(counter.key, entry);
        } else entry.state = state;
      }
      return algorithm.describe(entry?.state, now, counter, ok);
    });
    return { states, admitted };
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
