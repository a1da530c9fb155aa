/**
 * Spending held units (see hybrid-counting.ts): a request takes its cost from a reservation,
 * and gives it back if another counter refused the request or the call failed.
 */
import type { Reservation } from "../reservation.js";
import { dropExpired } from "../reservation-clock.js";
import type { CounterSpec, CounterState, RegionAllowances } from "../types.js";
import { windowSpanOf } from "../windows.js";

/** What a request took from a reservation, to give back if another counter refuses it. */
export interface Taken {
  readonly reservation: Reservation;
  readonly counter: CounterSpec;
  /** The reservation's window when the units were taken: they are never given to another. */
  readonly index: number;
}

/**
 * What a path that reserves for a request's counters needs of the hybrid layer, whichever it
 * is: through the region (region-path.ts) or straight to the store (reserve.ts).
 */
export interface RequestPath {
  readonly allowances: RegionAllowances | undefined;
  /** The counter's reservation in the request's window. */
  reservationOf(counter: CounterSpec): Reservation;
  /** Admits counter `i` from what `reservation` holds; whether it could. */
  take(reservation: Reservation, i: number): boolean;
}

export const NOT_ASKED: CounterState = Object.freeze({
  allowed: true,
  count: 0,
  remaining: 0,
  resetAt: 0,
  retryAfterMs: 0,
  // The request was refused before this counter was asked: it has no count to tell.
  countUnknown: true,
});

/**
 * Whether a counter is spent from reservations. A cost of 0 is a read (a peek, rls's
 * `hits_addend: 0`): it goes to the store as an exact counter, so it neither reserves nor
 * reports what this process holds, only the store's count.
 */
export function isHybrid(counter: CounterSpec): boolean {
  return counter.counting === "hybrid" && counter.mode === "enforce" && counter.cost > 0;
}

/**
 * The rule a reservation is for, beside its key: units reserved under one limit, algorithm or
 * window are never spent under another (a pass holder's band; a reload that changed the rule).
 */
export function specOf(counter: CounterSpec): string {
  return `${counter.limit}|${counter.algorithm}|${windowSpanOf(counter.window)}`;
}

/**
 * Takes `counter.cost` from what `reservation` holds, if it holds that much and may still spend
 * it at `at` (the scheduler's clock; `leased`: leases apply), and answers the request's state
 * for the counter in `states[index]`. Resolves to whether it could.
 */
export function takeHeld(
  reservation: Reservation,
  counter: CounterSpec,
  states: CounterState[],
  taken: Taken[],
  index: number,
  at: number,
  leased: boolean,
): boolean {
  if (reservation.held > 0) dropExpired(reservation, at, leased);
  // Written so that a count that is not a number can never admit.
  if (!(reservation.held >= counter.cost)) return false;
  reservation.held -= counter.cost;
  reservation.used += counter.cost;
  taken.push({ reservation, counter, index: reservation.index });
  // What this process knows: the store's count at its last reservation, less what it holds.
  const count = Math.min(counter.limit, Math.max(0, reservation.storeCount - reservation.held));
  states[index] = {
    allowed: true,
    count,
    remaining: Math.max(0, counter.limit - count),
    resetAt: reservation.resetAt,
    retryAfterMs: 0,
  };
  return true;
}

/** The request was refused, or failed: what it took from reservations is held again. */
export function giveBack(
  taken: readonly Taken[],
  counters: readonly CounterSpec[],
  states: CounterState[] | undefined,
): void {
  for (const { reservation, counter, index } of taken) {
    if (reservation.index !== index) continue;
    reservation.held += counter.cost;
    reservation.used -= counter.cost;
  }
  if (states === undefined) return;
  counters.forEach((counter, i) => {
    const state = states[i];
    if (!isHybrid(counter) || state === undefined || !state.allowed) return;
    // Admitted by its reservation, but not counted: the request was refused elsewhere.
    const count = Math.max(0, state.count - counter.cost);
    states[i] = { ...state, count, remaining: Math.max(0, counter.limit - count) };
  });
}
