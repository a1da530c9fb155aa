/**
 * How much a region holder is topped up with, and how much a process takes from it (see
 * holder.ts). Units a region or a process holds when a subject reaches its limit are capacity
 * nobody spends: sizes follow the rate the region (or the process) actually took units at, and
 * shrink to 2 s of it (a process's, less as the region's units run out) once the subject's
 * demand would pass half of what is left for it. Far from its
 * limit a subject is reserved for the rest of the window, which is what makes it cheap.
 */
import { type Reservation, rateOf } from "../reservation.js";
import type { CounterSpec } from "../types.js";

/**
 * Of what the lease item has left, the most a region reserves before it knows the subject's
 * rate there (its first reservation in a window, nothing taken the window before).
 */
const FIRST_SHARE_OF_REMAINING = 1 / 8;
/** How far ahead a region or a process reserves for a subject on its way to the limit. */
const CROWDED_RESERVE_MS = 2000;
/**
 * A subject is on its way to the limit once the region's demand over the rest of the window
 * would pass this share of what is left for it. Not all of it: a subject beyond its limit is
 * measured by the units it was granted, which never pass the limit, so its demand looks like
 * exactly what is left and it would never count as crowded.
 */
const CROWDED_SHARE_OF_REMAINING = 0.5;
/**
 * A process takes at most this share of the time the region's units (what the lease item has
 * left for it and what its holder has) last at the region's rate: what a process holds when
 * they are gone is what a Lambda@Edge instance its traffic has left strands.
 */
const CHUNK_SHARE_OF_SUPPLY = 1 / 4;
/** The least a chunk of a crowded subject covers (a request at a time is a write each). */
const MIN_CHUNK_MS = 100;
/** Rates are measured over at least this long (or a tenth of a shorter window). */
const MIN_RATE_SPAN_MS = 10_000;

/**
 * What a process takes from the holder: its request's cost the first time it sees the subject
 * (a Lambda@Edge instance may never see it again), then what its own rate would use until
 * `until` (the window's end, or where its last part starts), or for a crowded subject up to 2 s
 * of it, less as the region's units run out (`crowdedChunkMs`).
 */
export function chunkSize(
  reservation: Reservation,
  counter: CounterSpec,
  at: number,
  until: number,
): number {
  const wanted = Math.max(0, reservation.wanted);
  if (reservation.used + reservation.previousUsed === 0) return counter.cost + wanted;
  const horizon = crowded(reservation, counter, at)
    ? crowdedChunkMs(reservation, counter, at)
    : until - at;
  const extra = Math.ceil(rateOf(reservation, at) * horizon);
  return safe(counter.cost + Math.max(0, extra, wanted), counter);
}

/**
 * What a region reserves in the lease item beyond `own` (the request that asks, if any): the
 * rate it took units at over the rest of the window (2 s of it when crowded), or before it
 * knows a rate, a share of what is left; never more than its share of what is left.
 */
export function regionSize(
  reservation: Reservation,
  counter: CounterSpec,
  at: number,
  own: number,
): number {
  const left = Math.max(0, counter.limit - storeCountOf(reservation) - own);
  const share = shareOf(reservation);
  const rate = regionRate(reservation, at);
  const horizon = crowded(reservation, counter, at) ? CROWDED_RESERVE_MS : reservation.end - at;
  // What the holder still has left counts toward it: top-ups never pile up.
  const have = reservation.region?.left ?? 0;
  const wanted = rate > 0 ? Math.ceil(rate * horizon) - have : Number.POSITIVE_INFINITY;
  return safe(own + Math.max(0, Math.min(wanted, Math.floor(left * share))), counter);
}

/** The region's rate of taking units (per ms), this window so far and the one before. */
export function regionRate(reservation: Reservation, at: number): number {
  const region = reservation.region;
  const taken = region === undefined ? 0 : region.granted - region.left;
  const length = reservation.end - reservation.start;
  const elapsed = Math.max(Math.min(MIN_RATE_SPAN_MS, length / 10), at - reservation.start);
  const previousSpan = reservation.previousRegionTaken > 0 ? length : 0;
  return (taken + reservation.previousRegionTaken) / (elapsed + previousSpan);
}

/**
 * On its way to the limit: the region's demand over the rest of the window is more than its
 * share of what the lease item has left.
 */
function crowded(reservation: Reservation, counter: CounterSpec, at: number): boolean {
  const left = Math.max(0, counter.limit - storeCountOf(reservation));
  const demand = regionRate(reservation, at) * (reservation.end - at);
  return demand > left * shareOf(reservation) * CROWDED_SHARE_OF_REMAINING;
}

/**
 * How far ahead a process takes for a crowded subject: 2 s, or a quarter of the time the
 * region's units last at its rate if that is less (at least `MIN_CHUNK_MS`). Measured on
 * `enterprise.yaml` with holders, the key 20% over its limit: a fixed 2 s left 3% to 5% of its
 * limit in instances when the region's units ran out, 0.5 s left under 1% but cost subjects far
 * from the end of their supply several times the takes (docs/accuracy.md).
 */
function crowdedChunkMs(reservation: Reservation, counter: CounterSpec, at: number): number {
  const left = Math.max(0, counter.limit - storeCountOf(reservation));
  const rate = regionRate(reservation, at);
  const supply = left * shareOf(reservation) + (reservation.region?.left ?? 0);
  const lasts = rate > 0 ? supply / rate : 0;
  return Math.min(CROWDED_RESERVE_MS, Math.max(MIN_CHUNK_MS, lasts * CHUNK_SHARE_OF_SUPPLY));
}

/** The region's part of what every region reserved: its share of what is left. */
function shareOf(reservation: Reservation): number {
  const storeCount = storeCountOf(reservation);
  const granted = reservation.region?.granted ?? 0;
  return storeCount > 0 && granted > 0 ? granted / storeCount : FIRST_SHARE_OF_REMAINING;
}

function storeCountOf(reservation: Reservation): number {
  return Math.max(reservation.storeCount, reservation.region?.storeCount ?? 0);
}

function safe(ask: number, counter: CounterSpec): number {
  return Number.isSafeInteger(ask) ? ask : counter.cost;
}
