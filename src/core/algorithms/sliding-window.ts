import { windowAt, windowEndOf } from "../windows.js";
import { countedAt, countWindowed, rollWindow, type WindowedState } from "./fixed-window.js";
import type { Algorithm, CounterRule } from "./types.js";

/**
 * Sliding-window counter: the current window's count plus the previous window's count weighted
 * by how much of it still lies inside the sliding window. Two numbers per key, no log of
 * timestamps, and none of the fixed window's double burst at the edge.
 */
function estimate(state: WindowedState | undefined, now: number, rule: CounterRule): number {
  if (state === undefined) return 0;
  const { start, end } = windowAt(rule.window, now);
  const weight = (end - now) / (end - start);
  return state.previous * weight + state.count;
}

export const slidingWindow: Algorithm<WindowedState> = {
  name: "sliding-window",

  allows(state, now, rule) {
    // A late request is read at the start of the counter's newest window (see `countedAt`).
    const at = countedAt(state, now, rule);
    return estimate(rollWindow(at.state, at.index), at.now, rule) + rule.cost <= rule.limit;
  },

  count: countWindowed,

  describe(state, stamp, rule, allowed) {
    const at = countedAt(state, stamp, rule);
    const now = at.now;
    const { index, start, end } = windowAt(rule.window, now);
    const length = end - start;
    const current = rollWindow(at.state, index);
    const used = estimate(current, now, rule);
    const count = current?.count ?? 0;
    const previous = current?.previous ?? 0;
    const resetAt = count > 0 ? end + length : previous > 0 ? end : now;
    return {
      allowed,
      count: Math.ceil(used - 1e-9),
      remaining: Math.max(0, Math.floor(rule.limit - used + 1e-9)),
      resetAt,
      retryAfterMs: allowed ? 0 : retryAfter(count, previous, now, end, length, rule),
    };
  },

  expiresAt(state, _now, rule) {
    // The count stays relevant through the next window, where it is the weighted "previous".
    return windowEndOf(rule.window, state.index + 1);
  },
};

/** When would a request of `rule.cost` pass, if nothing more were counted? */
function retryAfter(
  count: number,
  previous: number,
  now: number,
  end: number,
  length: number,
  rule: CounterRule,
): number {
  const { limit, cost } = rule;
  if (count + cost <= limit && previous > 0) {
    // The previous window's weight must fade enough within this window.
    const passAt = end - ((limit - cost - count) * length) / previous;
    return Math.max(1, Math.ceil(passAt - now));
  }
  // This window's count alone is too high: wait for its weight to fade in the next window.
  const nextEnd = end + length;
  if (limit - cost < 0 || count === 0) return nextEnd - now;
  const passAt = nextEnd - ((limit - cost) * length) / count;
  return Math.max(1, Math.ceil(passAt - now));
}
