/**
 * What the memory store does to the state objects it holds, beside the pure algorithms
 * (src/core/algorithms/): it writes each new state into the object it already holds instead of
 * keeping the one `count` returned, and counts a fixed window in one step. Both exist for the
 * memory store's speed, measured by the memory store rows of `bench/core.bench.ts` (a busy key
 * then allocates nothing that lives, and the window is located once instead of four times);
 * they stay here, behind the store's contract.
 */
import {
  ALGORITHMS,
  type Algorithm,
  type CounterRule,
  ownState,
  type TokenBucketState,
  type WindowedState,
} from "../core/algorithms/index.js";
import type { AlgorithmName, CounterState } from "../core/types.js";
import { windowEndOf, windowIndexAt, windowStartOf } from "../core/windows.js";

/** An algorithm as the memory store runs it. */
export interface InPlaceAlgorithm<S> extends Algorithm<S> {
  /** Copies a state's fields into another state object of this algorithm. */
  assign(target: S, source: S): void;
  /**
   * `allows`, `count`, `assign` and `describe` in one step on a state the store holds,
   * answering what `describe` would (with `allowed` as `allows` said before counting). Only for
   * an algorithm whose `count` does not depend on `allowed`; a test holds it to the separate
   * steps.
   */
  countInPlace?(state: S, now: number, rule: CounterRule): CounterState;
}

function assignWindowed(target: WindowedState, source: WindowedState): void {
  target.index = source.index;
  target.count = source.count;
  target.previous = source.previous;
  target.span = source.span;
}

/** The fixed window in one step (`countedAt` in core/algorithms/fixed-window.ts, unrolled). */
function countFixedWindowInPlace(
  state: WindowedState,
  stamp: number,
  rule: CounterRule,
): CounterState {
  const window = rule.window;
  let now = stamp;
  let index: number;
  let span: number;
  if ("ms" in window) {
    index = Math.floor(now / window.ms);
    span = window.ms;
  } else {
    index = windowIndexAt(window, now);
    span = -window.months;
  }
  if (state.span !== span && ownState(state, index, span) === undefined) {
    // Counted under another window: this rule's counter starts here.
    state.index = index;
    state.count = 0;
    state.previous = 0;
  } else if (state.index > index) {
    // Counted late: in the counter's newest window, at its start.
    index = state.index;
    now = windowStartOf(window, index);
  } else if (state.index !== index) {
    state.previous = state.index === index - 1 ? state.count : 0;
    state.count = 0;
    state.index = index;
  }
  state.span = span;
  const end = windowEndOf(window, index);
  const count = state.count + rule.cost;
  state.count = count;
  const allowed = count <= rule.limit;
  return {
    allowed,
    count,
    remaining: allowed ? rule.limit - count : 0,
    resetAt: end,
    retryAfterMs: allowed ? 0 : end - now,
  };
}

// biome-ignore lint/suspicious/noExplicitAny: states differ per algorithm; the store keeps them opaque.
export const IN_PLACE_ALGORITHMS: Readonly<Record<AlgorithmName, InPlaceAlgorithm<any>>> = {
  "fixed-window": {
    ...ALGORITHMS["fixed-window"],
    assign: assignWindowed,
    countInPlace: countFixedWindowInPlace,
  },
  "sliding-window": { ...ALGORITHMS["sliding-window"], assign: assignWindowed },
  "token-bucket": {
    ...ALGORITHMS["token-bucket"],
    assign(target: TokenBucketState, source: TokenBucketState) {
      target.tat = source.tat;
    },
  },
};
