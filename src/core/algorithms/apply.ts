/**
 * The `Store` contract's three steps over states a store holds itself: read every counter's
 * state, decide whether the request is admitted, write the states that count it. A store that
 * keeps states in memory or in a transaction (local counting, a Durable Object, a database with
 * transactions) gives `applyCounters` a `CounterStates` and gets the contract's answer; the
 * rules of who counts what are written here once (see `Store` in core/types.ts).
 */
import type { CounterSpec, CounterState } from "../types.js";
import { ALGORITHMS } from "./table.js";

/**
 * Where a store keeps its counters' states, as `applyCounters` reads and writes them. States
 * are the algorithms' own, opaque to the store; `applyCounters` never changes one it was given.
 */
export interface CounterStates {
  /**
   * The state kept for `counter`, or undefined when there is none. A store that drops a state
   * only after its expiry may answer an expired one: the algorithms read it as no state.
   */
  get(counter: CounterSpec): unknown;
  /** Keeps `counter`'s new state; it carries no information after `expiresAt` (epoch ms). */
  set(counter: CounterSpec, state: unknown, expiresAt: number): void;
}

export interface AppliedCounters {
  /** One state per counter, in order. */
  readonly states: CounterState[];
  /** Whether every `enforce` counter allowed the request (and so every counter counted it). */
  readonly admitted: boolean;
}

/**
 * Applies one request's counters at `now`: admitted when every `enforce` counter allows it;
 * then counted on every counter when admitted, on the refusing ones when refused, and on
 * `observe` counters always; a counter of cost 0 is only read. Each counter is read once,
 * before any is written.
 */
export function applyCounters(
  counters: readonly CounterSpec[],
  now: number,
  kept: CounterStates,
): AppliedCounters {
  const held = counters.map((counter) => kept.get(counter));
  const allowed = counters.map((counter, i) =>
    ALGORITHMS[counter.algorithm].allows(held[i], now, counter),
  );
  const admitted = counters.every((counter, i) => counter.mode === "observe" || allowed[i]);
  const states = counters.map((counter, i) => {
    const algorithm = ALGORITHMS[counter.algorithm];
    const ok = allowed[i] as boolean;
    let state = held[i];
    // A cost of 0 reads (limiter.peek, rls's hits_addend: 0, a hybrid fence's read): nothing
    // is written.
    if (counter.cost > 0 && (admitted || !ok || counter.mode === "observe")) {
      state = algorithm.count(state, now, counter, ok);
      kept.set(counter, state, algorithm.expiresAt(state, now, counter));
    }
    return algorithm.describe(state, now, counter, ok);
  });
  return { states, admitted };
}
