import { windowEndOf, windowIndexAt } from "../windows.js";
import type { Algorithm, CounterRule } from "./types.js";

/** Count in the window `index`; `previous` is the count of window `index - 1` (sliding window). */
export interface WindowedState {
  index: number;
  count: number;
  previous: number;
}

/**
 * Counting is the same for both windowed algorithms: the request's cost is added to the window
 * that contains `now` (they differ in how they read the count).
 */
export function countWindowed(
  state: WindowedState | undefined,
  now: number,
  rule: CounterRule,
): WindowedState {
  const index = windowIndexAt(rule.window, now);
  const current = rollWindow(state, index);
  return {
    index,
    count: (current?.count ?? 0) + rule.cost,
    previous: current?.previous ?? 0,
  };
}

/** Shared by the two windowed algorithms. */
export function assignWindowed(target: WindowedState, source: WindowedState): void {
  target.index = source.index;
  target.count = source.count;
  target.previous = source.previous;
}

/** Moves a state into the window that contains `now`, carrying the previous count if adjacent. */
export function rollWindow(
  state: WindowedState | undefined,
  index: number,
): WindowedState | undefined {
  if (state === undefined || state.index === index) return state;
  return { index, count: 0, previous: state.index === index - 1 ? state.count : 0 };
}

/**
 * Fixed window aligned to the epoch, as in seed 000. Refused requests are counted on the
 * counter that refused them (the seed's `ADD` keeps counting), which the challenge band needs
 * to tell "a little over" from "far over"; the count resets with the window, so this never
 * extends a block past the window's end.
 */
export const fixedWindow: Algorithm<WindowedState> = {
  name: "fixed-window",

  allows(state, now, rule) {
    const index = windowIndexAt(rule.window, now);
    const count = rollWindow(state, index)?.count ?? 0;
    return count + rule.cost <= rule.limit;
  },

  count: countWindowed,

  describe(state, now, rule, allowed) {
    const index = windowIndexAt(rule.window, now);
    const end = windowEndOf(rule.window, index);
    const count = rollWindow(state, index)?.count ?? 0;
    return {
      allowed,
      count,
      remaining: Math.max(0, rule.limit - count),
      resetAt: end,
      retryAfterMs: allowed ? 0 : end - now,
    };
  },

  assign: assignWindowed,

  countInPlace(state, now, rule) {
    const window = rule.window;
    let index: number;
    let end: number;
    if ("ms" in window) {
      index = Math.floor(now / window.ms);
      end = (index + 1) * window.ms;
    } else {
      index = windowIndexAt(window, now);
      end = windowEndOf(window, index);
    }
    if (state.index !== index) {
      state.previous = state.index === index - 1 ? state.count : 0;
      state.count = 0;
      state.index = index;
    }
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
  },

  expiresAt(state, _now, rule) {
    return windowEndOf(rule.window, state.index);
  },
};
