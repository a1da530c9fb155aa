import { windowEndOf, windowIndexAt, windowSpanOf, windowStartOf } from "../windows.js";
import type { Algorithm, CounterRule } from "./types.js";

/** Count in the window `index`; `previous` is the count of window `index - 1` (sliding window). */
export interface WindowedState {
  index: number;
  count: number;
  previous: number;
  /**
   * The window the state was counted under (`windowSpanOf`). A state of another span belongs to
   * another rule (a reload changed the window) and is no state for this one. Undefined in states
   * written before it existed: those are believed only where their index is plausible.
   */
  span: number | undefined;
}

/**
 * Where a request is counted: the window of `now`, unless the counter already holds a later
 * window. Windows never move backwards: a request stamped before the counter's newest window
 * (counted late after a slow token check, or sent by a process whose clock is behind) is counted
 * in that newest window, at its start, never in a window the counter has left: rewinding would
 * forget the newer window's count and admit its limit a second time. The store saw the request
 * after that window began, so that is the window it costs.
 *
 * `index` and `now` are what the algorithm then works with; a state of another rule is dropped.
 */
export interface CountedAt {
  readonly state: WindowedState | undefined;
  readonly index: number;
  readonly now: number;
}

export function countedAt(
  state: WindowedState | undefined,
  now: number,
  rule: CounterRule,
): CountedAt {
  const index = windowIndexAt(rule.window, now);
  const own = ownState(state, index, windowSpanOf(rule.window));
  if (own === undefined || own.index <= index) return { state: own, index, now };
  return { state: own, index: own.index, now: windowStartOf(rule.window, own.index) };
}

/** `state` if it was counted under this rule's windows, else undefined (see `WindowedState.span`). */
export function ownState(
  state: WindowedState | undefined,
  index: number,
  span: number,
): WindowedState | undefined {
  if (state === undefined) return undefined;
  if (state.span === undefined) return state.index <= index + 1 ? state : undefined;
  return state.span === span ? state : undefined;
}

/**
 * Counting is the same for both windowed algorithms: the request's cost is added to the window
 * it is counted in (see `countedAt`); they differ in how they read the count.
 */
export function countWindowed(
  state: WindowedState | undefined,
  now: number,
  rule: CounterRule,
): WindowedState {
  const at = countedAt(state, now, rule);
  const current = rollWindow(at.state, at.index);
  return {
    index: at.index,
    count: (current?.count ?? 0) + rule.cost,
    previous: current?.previous ?? 0,
    span: windowSpanOf(rule.window),
  };
}

/**
 * Moves a state into the window `index`, carrying the previous count if adjacent. `index` is
 * never before the state's own (see `countedAt`).
 */
export function rollWindow(
  state: WindowedState | undefined,
  index: number,
): WindowedState | undefined {
  if (state === undefined || state.index === index) return state;
  return {
    index,
    count: 0,
    previous: state.index === index - 1 ? state.count : 0,
    span: state.span,
  };
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
    const at = countedAt(state, now, rule);
    const count = rollWindow(at.state, at.index)?.count ?? 0;
    return count + rule.cost <= rule.limit;
  },

  count: countWindowed,

  describe(state, now, rule, allowed) {
    const at = countedAt(state, now, rule);
    const end = windowEndOf(rule.window, at.index);
    const count = rollWindow(at.state, at.index)?.count ?? 0;
    return {
      allowed,
      count,
      remaining: Math.max(0, rule.limit - count),
      resetAt: end,
      retryAfterMs: allowed ? 0 : end - at.now,
    };
  },

  expiresAt(state, _now, rule) {
    return windowEndOf(rule.window, state.index);
  },
};
