/**
 * Reservations follow the store's clock (SPEC.md, "Time"): units a store granted belong to the
 * window it counted them in, and are never spent after that window ended on the store's clock,
 * whatever this process's clock says. A process whose clock is behind the store's would otherwise
 * spend them in the store's next window, beside everything that window admits on its own.
 *
 * The store's answer says how long its window has left: the window's end (from `resetAt`) less
 * the store's clock when it counted (`CounterState.storeNow`). The span is measured on this
 * process's monotonic clock from when the reservation was sent: the store counted after that, so
 * what is held stops being spent no later than the store's window ends (at most a round trip
 * earlier). Only elapsed time matters, never the offset between the two clocks.
 *
 * A store that counts at the caller's `now` (DynamoDB, Redis with `clock: "caller"`: no
 * `storeNow`) has no clock of its own: it counts a request in the window of its stamp, however
 * late the request reaches it. Units it granted for a window are then spent by requests stamped
 * in that window, and only by them (hybrid-counting.ts picks a request's reservation by its
 * stamp), whenever they are decided: a request stamped just before the window ended that waited
 * for another's reservation is counted in that window by the store, and is admitted from it.
 * Dropping the units at the window's end on the monotonic clock would leave them counted and
 * unspent, and refuse that request (and the subject's next ones) under the limit.
 */
import { type Reservation, storeWindowIndex } from "./reservation.js";
import type { CounterSpec, CounterState } from "./types.js";
import { windowStartOf } from "./windows.js";

/** When a reservation was sent: the scheduler's monotonic ms. */
export interface Sent {
  readonly at: number;
}

/**
 * When the store's window that `state` was counted in ends, on the clock of `sent.at`; never,
 * for a store that counts at the caller's stamp (the stamp decides, see above).
 */
export function storeWindowEndsAt(counter: CounterSpec, state: CounterState, sent: Sent): number {
  if (state.storeNow === undefined) return Number.POSITIVE_INFINITY;
  const end = windowStartOf(counter.window, storeWindowIndex(counter, state) + 1);
  return sent.at + (end - state.storeNow);
}

/**
 * Drops what a reservation holds once it may not be spent at `at` (the scheduler's clock): the
 * store's window it was counted in has ended, or (`leased`) its lease ran out and a reset may
 * have taken effect since. The units stay counted in the store, unused. Written so that a time
 * that is not a number drops them.
 */
export function dropExpired(reservation: Reservation, at: number, leased: boolean): void {
  if (!(at < reservation.windowEndsAt) || (leased && !(at < reservation.leaseEnd))) {
    reservation.held = 0;
  }
}
