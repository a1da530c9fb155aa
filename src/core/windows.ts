import type { WindowSpec } from "./types.js";

/**
 * How long a store keeps a counter after its state stops mattering. A request can reach a store
 * a little after the time it was stamped with (another process's clock is behind, a call waits
 * its turn on the connection; never more than the decision budget or the connect budget, 1 s by
 * default): it must still find its window's count, not an empty counter that would admit the
 * window's limit again.
 */
export const LATE_GRACE_MS = 2_000;

/** The window that contains `now`: its index (stable across processes), start and end (ms). */
export interface WindowBounds {
  readonly index: number;
  readonly start: number;
  readonly end: number;
}

/**
 * Windows are aligned to the Unix epoch, so every process and every store agrees on them
 * without coordination (the seed's `Math.floor(Date.now() / 60000)`). Calendar months are
 * aligned to January 1970 in UTC.
 */
export function windowAt(window: WindowSpec, now: number): WindowBounds {
  if ("ms" in window) {
    const index = Math.floor(now / window.ms);
    return { index, start: index * window.ms, end: (index + 1) * window.ms };
  }
  const date = new Date(now);
  const monthsSinceEpoch = (date.getUTCFullYear() - 1970) * 12 + date.getUTCMonth();
  const index = Math.floor(monthsSinceEpoch / window.months);
  return {
    index,
    start: monthStart(index * window.months),
    end: monthStart((index + 1) * window.months),
  };
}

/** Index of the window that contains `now`, without allocating (the hot path of every store). */
export function windowIndexAt(window: WindowSpec, now: number): number {
  if ("ms" in window) return Math.floor(now / window.ms);
  return windowAt(window, now).index;
}

/** Start (epoch ms) of the window with this index. */
export function windowStartOf(window: WindowSpec, index: number): number {
  if ("ms" in window) return index * window.ms;
  return monthStart(index * window.months);
}

/**
 * A number that tells windows of different lengths apart: the length in ms, or minus the number
 * of months. A counter's state records it, so that a state counted under another window (a rule
 * whose window a reload changed) is never read as this rule's.
 */
export function windowSpanOf(window: WindowSpec): number {
  return "ms" in window ? window.ms : -window.months;
}

/** End (exclusive, epoch ms) of the window with this index. */
export function windowEndOf(window: WindowSpec, index: number): number {
  if ("ms" in window) return (index + 1) * window.ms;
  return monthStart((index + 1) * window.months);
}

function monthStart(monthsSinceEpoch: number): number {
  return Date.UTC(1970 + Math.floor(monthsSinceEpoch / 12), monthsSinceEpoch % 12, 1);
}

/** Nominal length of a window in ms (a month counts as its actual length at `now`). */
export function windowLengthMs(window: WindowSpec, now: number): number {
  if ("ms" in window) return window.ms;
  const bounds = windowAt(window, now);
  return bounds.end - bounds.start;
}
