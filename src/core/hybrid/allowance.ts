/**
 * Region allowances in the hybrid layer (`Store.allowances`; on DynamoDB the store's opt-in
 * `regionAllowance`, stores/dynamodb/region-allowance.ts). A request whose process holds nothing
 * for a counter and whose region's holder is empty (the subject's first request in the region
 * in this window) spends its region's allowance, one conditional write in the region, instead
 * of waiting for the lease region; the region's holder is filled behind it. A request refused
 * by the lease item while units are still held back for allowances starts taking back those no
 * region spent, for the requests after it. The lease item counted every allowance from its
 * first write, so neither step can admit beyond the limit.
 */
import { grantedBy, type Reservation } from "../reservation.js";
import type { CounterSpec, CounterState, RegionAllowances, StoreCallProgress } from "../types.js";
import { ownState } from "./grant.js";

/** Claims of the region's allowance started beside the take from its holder, by counter. */
export type EarlyClaims = ReadonlyMap<number, Promise<boolean>>;

/**
 * Starts claiming the region's allowance beside the take from the region's holder, for each
 * counter of `missing` of which this process saw nothing in this window or the one before (most
 * likely the subject's first request in the region): its answer then takes one round trip in
 * the region, not two. A claim that was not needed (the take found units) leaves the allowance
 * unspent in the lease item: capacity, never an admission.
 */
export function claimEarly(
  allowances: RegionAllowances,
  counters: readonly CounterSpec[],
  missing: readonly number[],
  reservations: readonly Reservation[],
  now: number,
  progress: StoreCallProgress | undefined,
): EarlyClaims {
  const claims = new Map<number, Promise<boolean>>();
  missing.forEach((i, j) => {
    const reservation = reservations[j] as Reservation;
    const seen =
      reservation.region !== undefined ||
      reservation.used > 0 ||
      reservation.previousUsed > 0 ||
      reservation.previousRegionTaken > 0;
    if (seen) return;
    const claim = tryClaim(allowances, counters[i] as CounterSpec, reservation, now, progress);
    if (claim !== undefined) claims.set(i, claim);
  });
  return claims;
}

/**
 * Spends the region's allowance for each counter of `missing` that has one left to try in this
 * window (or takes the answer of the claim `early` started), and calls `spent` for each one
 * spent (the caller fills the region's holder behind it). Resolves to the counters still
 * missing.
 */
export async function spendAllowances(
  spent: (reservation: Reservation, counter: CounterSpec, at: number) => void,
  allowances: RegionAllowances,
  early: EarlyClaims,
  counters: readonly CounterSpec[],
  missing: readonly number[],
  reservations: readonly Reservation[],
  now: number,
  progress: StoreCallProgress | undefined,
  states: CounterState[],
): Promise<number[]> {
  const claimed = await Promise.all(
    missing.map(
      (i, j) =>
        early.get(i) ??
        tryClaim(
          allowances,
          counters[i] as CounterSpec,
          reservations[j] as Reservation,
          now,
          progress,
        ) ??
        false,
    ),
  );
  const still: number[] = [];
  missing.forEach((i, j) => {
    const counter = counters[i] as CounterSpec;
    const reservation = reservations[j] as Reservation;
    if (claimed[j] !== true) {
      still.push(i);
      return;
    }
    states[i] = ownState(counter, counter.cost, {
      allowed: true,
      count: reservation.storeCount + counter.cost,
      remaining: 0,
      resetAt: reservation.end,
      retryAfterMs: 0,
    });
    spent(reservation, counter, Math.max(now, reservation.start));
  });
  return still;
}

/**
 * One claim a window in each process, for a request of one unit (an allowance is one): after
 * it, the region's holder has units or the allowance is gone (spent by another of the region's
 * processes, or revoked). Undefined when there is nothing to try.
 */
function tryClaim(
  allowances: RegionAllowances,
  counter: CounterSpec,
  reservation: Reservation,
  now: number,
  progress: StoreCallProgress | undefined,
): Promise<boolean> | undefined {
  if (reservation.allowanceTried || counter.cost !== 1 || !allowances.covers(counter)) {
    return undefined;
  }
  reservation.allowanceTried = true;
  const at = Math.max(now, reservation.start);
  return allowances.claim(counter, at, progress).catch(() => false);
}

/**
 * A lease item refused `counter` while it still holds units back for allowances: takes back,
 * in the background, those no region spent (once a window in each process), so that the
 * subject's next request finds them in the lease item, with what the refused reservation of
 * `asked` units counted beyond its grant. Not on the refused request's path: the
 * revocations go to every far region, beyond any decision budget. Returns the refusal, with a
 * retry after `retryMs` (the block cache then holds it that long, not to the window's end).
 */
export function reclaimAllowances(
  allowances: RegionAllowances,
  counter: CounterSpec,
  reservation: Reservation,
  asked: number,
  refused: CounterState,
  now: number,
  retryMs: number,
): CounterState {
  if ((refused.heldBack ?? 0) === 0 || !allowances.covers(counter)) return refused;
  if (!reservation.reclaimed) {
    reservation.reclaimed = true;
    // The refused reservation's units beyond its grant go back too: counted, held nowhere. (A
    // grant short of the request's cost may be held, and spent by a smaller request: it stays.)
    const granted = grantedBy(counter, asked, refused);
    allowances.reclaim(counter, now, asked - granted).catch(() => 0);
  }
  return { ...refused, retryAfterMs: Math.max(1, Math.min(refused.retryAfterMs, retryMs)) };
}
