import { windowLengthMs } from "../windows.js";
import type { Algorithm, CounterRule } from "./types.js";

/** Generic cell rate algorithm: one timestamp per key, the theoretical arrival time. */
export interface TokenBucketState {
  tat: number;
}

// Float slack for emission intervals such as 60000/7 ms.
const EPSILON = 1e-6;

function interval(rule: CounterRule, now: number): number {
  return windowLengthMs(rule.window, now) / rule.limit;
}

/**
 * Token bucket expressed as GCRA: `limit` tokens, refilled evenly over `window`, so a client
 * may burst up to `limit` and then sustain `limit` per window. A refused request takes no
 * token and changes nothing.
 */
export const tokenBucket: Algorithm<TokenBucketState> = {
  name: "token-bucket",

  allows(state, now, rule) {
    const tat = Math.max(state?.tat ?? now, now);
    return (
      tat + rule.cost * interval(rule, now) - now <= windowLengthMs(rule.window, now) + EPSILON
    );
  },

  count(state, now, rule, allowed) {
    const tat = Math.max(state?.tat ?? now, now);
    if (!allowed) return { tat };
    return { tat: tat + rule.cost * interval(rule, now) };
  },

  describe(state, now, rule, allowed) {
    const length = windowLengthMs(rule.window, now);
    const step = interval(rule, now);
    const tat = Math.max(state?.tat ?? now, now);
    const inUse = (tat - now) / step;
    return {
      allowed,
      count: Math.ceil(inUse - EPSILON),
      remaining: Math.max(0, Math.floor(rule.limit - inUse + EPSILON)),
      resetAt: Math.ceil(tat),
      retryAfterMs: allowed ? 0 : Math.max(1, Math.ceil(tat + rule.cost * step - length - now)),
    };
  },

  expiresAt(state) {
    return Math.ceil(state.tat);
  },
};
