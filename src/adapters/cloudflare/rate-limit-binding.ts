/** What the native `ratelimits` binding is asked (its key) and what its answer means here. */
import type { CounterSpec, CounterState } from "../../core/types.js";
import { windowAt } from "../../core/windows.js";

/**
 * Seed 003's `operation:subject`: short, from data the limiter controls (the subject is an
 * escaped IP or verified user id). The scope is added when it is not the namespace itself, so
 * that two rules sharing a binding never share a count.
 */
export function bindingKey(spec: Pick<CounterSpec, "key" | "subject" | "namespace">): string {
  const scope = spec.key.slice(spec.key.lastIndexOf("|") + 1);
  const operation = spec.key.slice(spec.subject.length + 1, spec.key.length - scope.length - 1);
  return scope === operation
    ? `${operation}:${spec.subject}`
    : `${operation}/${scope}:${spec.subject}`;
}

/**
 * The binding answers only yes or no. When it refuses, the client may pass again when the
 * binding's period rolls over; Cloudflare does not say when that is, so this assumes periods
 * aligned to the epoch (as the local emulator does): a Retry-After of at most the period.
 */
export function bindingState(spec: CounterSpec, success: boolean, now: number): CounterState {
  const { end } = windowAt(spec.window, now);
  if (success) {
    return {
      allowed: true,
      count: 0,
      remaining: 0,
      resetAt: end,
      retryAfterMs: 0,
      countUnknown: true,
    };
  }
  // The binding never reports a count: the state says so, and the limiter discloses none.
  return {
    allowed: false,
    count: spec.limit,
    remaining: 0,
    resetAt: end,
    retryAfterMs: end - now,
    countUnknown: true,
  };
}
