/**
 * A request's hybrid counters that its process holds too little for, where the store has no
 * region holder (hybrid-counting.ts): one store call reserves for all of them, and the request
 * is admitted from what is granted. Other requests for the same subjects wait for this call
 * rather than sending their own (not where a call in flight cannot be shared: Workers).
 */
import { grantedBy, type Reservation } from "../reservation.js";
import type { Sent } from "../reservation-clock.js";
import type { CounterSpec, CounterState, StoreCallProgress } from "../types.js";
import { reclaimAllowances } from "./allowance.js";
import { fencesFor } from "./fence.js";
import { keepGrant, ownState, refusedState } from "./grant.js";
import type { Refiller } from "./refill.js";
import type { RequestPath } from "./spend.js";

/**
 * A refusal that started taking allowances back (allowance.ts) is retried after this many
 * round trips, about what the revocations take, rather than blocked to the window's end.
 */
const RECLAIM_RETRY_ROUND_TRIPS = 4;

/** What a direct reservation needs of the hybrid layer. */
export interface StorePath extends RequestPath {
  /** The store, its scheduler, leases, round trips and reservation sizes (refill.ts). */
  readonly refiller: Refiller;
  /** Whether a call in flight may be waited for by other requests (not on Workers). */
  readonly shared: boolean;
}

/** One store call reserving for every counter in `missing`; whether one of them refused. */
export async function reserveInStore(
  path: StorePath,
  counters: readonly CounterSpec[],
  missing: readonly number[],
  now: number,
  progress: StoreCallProgress | undefined,
  states: CounterState[],
): Promise<boolean> {
  const { refiller } = path;
  const reservations = missing.map((i) => path.reservationOf(counters[i] as CounterSpec));
  const asks = missing.map((i, j) =>
    refiller.sizeFor(reservations[j] as Reservation, counters[i] as CounterSpec, now),
  );
  const asked = missing.map((i, j) => ({
    ...(counters[i] as CounterSpec),
    cost: asks[j] as number,
    mode: "observe" as const,
  }));
  const { fenced, fences } = fencesFor(asked, missing, counters, reservations, refiller.leaseMs);
  const call = refiller.inner.apply(
    fences.length === 0 ? asked : [...asked, ...fences],
    now,
    progress,
  );
  const sent: Sent = { at: refiller.scheduler.now() };
  const landed = call.then(
    () => refiller.measured(sent.at),
    () => undefined,
  );
  if (path.shared) {
    for (const reservation of reservations) reservation.pending = landed;
  }
  let answers: CounterState[];
  try {
    answers = await call;
  } finally {
    for (const reservation of reservations) {
      if (reservation.pending === landed) reservation.pending = undefined;
    }
  }
  let refused = false;
  let fenceAt = asked.length;
  missing.forEach((i, j) => {
    const counter = counters[i] as CounterSpec;
    const reservation = reservations[j] as Reservation;
    const state = answers[j] as CounterState;
    const ask = asks[j] as number;
    const granted = keepGrant(
      reservation,
      counter,
      ask,
      state,
      fenced[j] === true ? answers[fenceAt++] : undefined,
      sent,
      refiller.leaseMs,
    );
    if (granted === "held" && path.take(reservation, i)) return;
    // Held but already past the store's window as this process reckons it (the answer came
    // back within a round trip of the window's end): the store counted the request's own cost
    // in its window, which admits the request that asked, as exact counting would; the rest
    // stays unspent. Refused instead, a far store's subjects would be refused under their
    // limit in each window's last round trip (test/core/hybrid-window-end.test.ts).
    if (
      granted === "own" ||
      (granted === "held" && grantedBy(counter, ask, state) >= counter.cost)
    ) {
      // Counted in the store for this request alone: admitted, nothing held.
      states[i] = ownState(counter, ask, state);
      return;
    }
    refused = true;
    const allowances = path.allowances;
    states[i] =
      allowances === undefined
        ? refusedState(state)
        : reclaimAllowances(
            allowances,
            counter,
            reservation,
            ask,
            refusedState(state),
            now,
            RECLAIM_RETRY_ROUND_TRIPS * refiller.roundTripMs,
          );
  });
  return refused;
}
