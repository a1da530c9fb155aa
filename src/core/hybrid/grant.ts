/**
 * What a store's answer to a reservation grants, and whether it may be held (see
 * hybrid-counting.ts): a reservation is sent as an `observe` counter of cost N, counted in full
 * whatever the outcome; the units granted are `limit - (count - N)`, at most N.
 */
import {
  addGrant,
  grantedBy,
  moveReservation,
  type Reservation,
  storeWindowIndex,
} from "../reservation.js";
import { type Sent, storeWindowEndsAt } from "../reservation-clock.js";
import type { CounterSpec, CounterState } from "../types.js";

/**
 * What a store's answer to a reservation of `asked` units grants, and whether it may be held:
 * `held` when it is added to the reservation (same window, no fence), `own` when it covers
 * only the cost of the request that asked (a grant counted in another window, or a fence up),
 * `none` when it does not cover that. `leaseMs` is 0 where leases do not apply.
 */
export function keepGrant(
  reservation: Reservation,
  counter: CounterSpec,
  asked: number,
  state: CounterState,
  fence: CounterState | undefined,
  sent: Sent,
  leaseMs: number,
): "held" | "own" | "none" {
  const granted = grantedBy(counter, asked, state);
  if (fence !== undefined) reservation.fenced = fence.count > 0;
  if (reservation.fenced) {
    // A reset is under way: drop what was held, hold nothing until it has taken effect (and
    // ask only for each request's own cost meanwhile: see `reservationFor` in hybrid-counting.ts).
    reservation.held = 0;
  } else if (holdGrant(reservation, counter, asked, state, sent, leaseMs)) {
    return "held";
  }
  return granted >= counter.cost ? "own" : "none";
}

/**
 * Adds a grant to the reservation if the store counted it in the reservation's window, or in
 * a later one (the reservation moves there); a grant counted in an earlier window is not held.
 * What is held is spent until the store's window ends (reservation-clock.ts).
 */
export function holdGrant(
  reservation: Reservation,
  counter: CounterSpec,
  asked: number,
  state: CounterState,
  sent: Sent,
  leaseMs: number,
): boolean {
  const index = storeWindowIndex(counter, state);
  if (index > reservation.index) moveReservation(reservation, counter.window, index);
  else if (index < reservation.index) return false;
  addGrant(reservation, counter, asked, state);
  reservation.windowEndsAt = storeWindowEndsAt(counter, state, sent);
  if (leaseMs > 0) reservation.leaseEnd = sent.at + leaseMs;
  return true;
}

/** A grant that covers only the request that asked (`own`): admitted, nothing held. */
export function ownState(counter: CounterSpec, asked: number, state: CounterState): CounterState {
  const count = Math.min(counter.limit, Math.max(0, state.count - asked + counter.cost));
  return {
    allowed: true,
    count,
    remaining: counter.limit - count,
    resetAt: state.resetAt,
    retryAfterMs: 0,
  };
}

/** A grant that does not cover the request: refused, with the store's count. */
export function refusedState(state: CounterState): CounterState {
  return {
    allowed: false,
    count: state.count,
    remaining: 0,
    resetAt: state.resetAt,
    retryAfterMs: Math.max(1, state.retryAfterMs),
    ...(state.heldBack === undefined ? {} : { heldBack: state.heldBack }),
  };
}
