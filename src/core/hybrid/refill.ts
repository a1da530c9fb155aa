/**
 * Topping up in the background (see hybrid-counting.ts): a busy subject's reservation is sent
 * again before what is held runs out, so its next requests find units instead of waiting (and,
 * on Lambda@Edge, instead of spilling to new instances that would each reserve); a lease that
 * is running out while units are held is renewed.
 */
import type { Scheduler } from "../deadline.js";
import { type Reservation, rateOf } from "../reservation.js";
import type { Sent } from "../reservation-clock.js";
import type { CounterSpec, Store } from "../types.js";
import { fenceRead } from "./fence.js";
import { holdGrant } from "./grant.js";

/**
 * Reserve again, in the background, once what is held would last less than this many round
 * trips at the subject's rate: a busy subject then never waits for a reservation.
 */
const REFILL_ROUND_TRIPS = 3;
/** A lease is renewed in the background once less than this share of it is left. */
const RENEW_SHARE_OF_LEASE = 0.25;

/** What a refill needs of the hybrid layer that sends it. */
export interface Refiller {
  readonly inner: Store;
  readonly scheduler: Scheduler;
  /** 0 where leases do not apply. */
  readonly leaseMs: number;
  /** Recent reservation round trips, smoothed. */
  readonly roundTripMs: number;
  /** A reservation sent at `sentAt` (the scheduler's clock) was answered now. */
  measured(sentAt: number): void;
  /** Units to reserve for a request of `counter.cost` (the request's own cost behind a fence). */
  sizeFor(reservation: Reservation, counter: CounterSpec, now: number): number;
}

/**
 * Reserves again when what is held would not last `REFILL_ROUND_TRIPS` round trips at the
 * subject's rate, and renews a lease that is running out while units are held. Never where a
 * reservation in flight cannot be shared (the caller checks `requestScopedIo`).
 */
export function refillIfLow(
  refiller: Refiller,
  reservation: Reservation,
  counter: CounterSpec,
  now: number,
): void {
  // A subject seen once is not busy yet: its next request reserves for itself if it comes.
  if (reservation.pending !== undefined || reservation.used + reservation.previousUsed < 2) return;
  const { inner, scheduler, leaseMs } = refiller;
  const at = Math.max(now, reservation.start);
  const rate = rateOf(reservation, at);
  const low = reservation.held < rate * refiller.roundTripMs * REFILL_ROUND_TRIPS;
  const expiring =
    leaseMs > 0 &&
    reservation.held > 0 &&
    reservation.leaseEnd - scheduler.now() < leaseMs * RENEW_SHARE_OF_LEASE;
  if (!low && !expiring) return;
  const ask = low ? refiller.sizeFor(reservation, counter, now) - counter.cost : 0;
  if (ask <= 0 && !expiring) return;
  const asked: CounterSpec[] = ask > 0 ? [{ ...counter, cost: ask, mode: "observe" }] : [];
  const calls = leaseMs > 0 ? [...asked, fenceRead(counter, leaseMs)] : asked;
  const sent: Sent = { at: scheduler.now() };
  const landed = inner
    .apply(calls, now)
    .then(
      (answers) => {
        refiller.measured(sent.at);
        const fence = leaseMs > 0 ? answers[answers.length - 1] : undefined;
        if (fence !== undefined) reservation.fenced = fence.count > 0;
        if (reservation.fenced) {
          reservation.held = 0;
          return;
        }
        const state = asked.length > 0 ? answers[0] : undefined;
        if (state !== undefined) holdGrant(reservation, counter, ask, state, sent, leaseMs);
        // The fence was down when the store answered: what is held stays spendable.
        else if (leaseMs > 0) reservation.leaseEnd = sent.at + leaseMs;
      },
      // A failed refill costs nothing: the next request that finds too little reserves itself
      // under the decision budget, and the rule's fail mode applies there.
      () => undefined,
    )
    .finally(() => {
      if (reservation.pending === landed) reservation.pending = undefined;
    });
  reservation.pending = landed;
}
