/**
 * A request's hybrid counters through its region, where the store has a region holder
 * (hybrid-counting.ts): the holder first, one write in the region; where it is empty, the
 * region's allowance (allowance.ts), where the store has them; the lease region only when
 * neither answers. A region whose holder is marked full refuses without a call.
 */
import type { Reservation } from "../reservation.js";
import type { CounterSpec, CounterState, StoreCallProgress } from "../types.js";
import { claimEarly, spendAllowances } from "./allowance.js";
import {
  fillRegion,
  type HolderLayer,
  refusedFull,
  reserveForRegion,
  takeChunks,
} from "./holder.js";
import type { RequestPath } from "./spend.js";

/** What the region's path needs of the hybrid layer. */
export interface RegionPath extends RequestPath {
  readonly holder: HolderLayer;
}

/**
 * Decides each counter of `missing` (their processes hold nothing for them) through the region.
 * Resolves to whether one of them refused the request.
 */
export async function reserveThroughRegion(
  path: RegionPath,
  counters: readonly CounterSpec[],
  missing: readonly number[],
  now: number,
  progress: StoreCallProgress | undefined,
  states: CounterState[],
): Promise<boolean> {
  const { holder, allowances } = path;
  const reservationsOf = (indexes: readonly number[]) =>
    indexes.map((i) => path.reservationOf(counters[i] as CounterSpec));
  // The region's holder is marked full (this process saw it): nothing is left for the
  // subject in this window, here or in the store; refused without a call.
  if (refuseFull(path, counters, missing, now, states)) return true;
  // The region's holder first (one local write), the lease region only when it is empty.
  const held = reservationsOf(missing);
  const early =
    allowances === undefined
      ? undefined
      : claimEarly(allowances, counters, missing, held, now, progress);
  await takeChunks(holder, counters, missing, held, now, progress);
  let left = missing.filter((i, j) => !path.take(held[j] as Reservation, i));
  if (left.length === 0) return false;
  if (refuseFull(path, counters, left, now, states)) return true;
  // The holder is empty (the subject's first request in the region, this window): the
  // region's allowance answers it here, where there is one.
  if (allowances !== undefined && early !== undefined) {
    left = await spendAllowances(
      (reservation, counter, at) => fillRegion(holder, reservation, counter, at),
      allowances,
      early,
      counters,
      left,
      reservationsOf(left),
      now,
      progress,
      states,
    );
    if (left.length === 0) return false;
  }
  return reserveForRegion(holder, counters, left, reservationsOf(left), now, progress, states);
}

/** Refuses the counters of `missing` whose region's holder is full; whether there was one. */
function refuseFull(
  path: RegionPath,
  counters: readonly CounterSpec[],
  missing: readonly number[],
  now: number,
  states: CounterState[],
): boolean {
  let full = false;
  for (const i of missing) {
    const counter = counters[i] as CounterSpec;
    const refused = refusedFull(path.reservationOf(counter), counter, now);
    if (refused === undefined) continue;
    states[i] = refused;
    full = true;
  }
  return full;
}
