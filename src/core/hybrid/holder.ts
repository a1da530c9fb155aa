/**
 * A region's holder (see hybrid-counting.ts, "A region holder"): where the store has one
 * (`Store.holder`: DynamoDB with reservations in a lease region), a process takes its units
 * from an item in its region's nearest replica, one local conditional write per chunk, instead
 * of reserving in the lease region itself. The region's holder is topped up in the background
 * from the lease item (a reservation, then `fill`), when a take leaves it low and, for a subject
 * the region saw in the last part of a window, for the next window before it starts. Only a
 * request that finds the holder empty waits for the lease region.
 *
 * The bound is the lease item's: every unit in a holder was granted by it, within the limit, in
 * the window the holder's item is for; a process takes each unit once, spends it only in that
 * window, and gives back nothing (a unit it does not spend is capacity lost, never admitted).
 */
import type { Scheduler } from "../deadline.js";
import { grantedBy, type Reservation, storeWindowIndex } from "../reservation.js";
import type {
  CounterSpec,
  CounterState,
  RegionAllowances,
  RegionHolder,
  Store,
  StoreCallProgress,
} from "../types.js";
import { windowAt, windowStartOf } from "../windows.js";
import { reclaimAllowances } from "./allowance.js";
import { ownState, refusedState } from "./grant.js";
import { chunkSize, regionRate, regionSize } from "./holder-size.js";
import type { Refiller } from "./refill.js";

/** The holder is topped up once what it has left would last less than this many round trips. */
const LOW_ROUND_TRIPS = 4;
/**
 * How long after a region's holder was marked full its processes refuse the subject without
 * asking the store. Not to the window's end: units may come back (a reservation's refund,
 * allowances taken back), and a refusal answered at once draws a Lambda@Edge region's traffic
 * to the instances that refuse, away from those still holding units. Not much shorter: each
 * process asks the lease region again once it has passed. docs/accuracy.md, "Region allowances
 * (opt-in)", measures the choice (`--modes hybrid+allowance` on enterprise.yaml and mixed.yaml).
 */
const FULL_RECHECK_MS = 3000;
/** A region reserves the next window in the last this share of the current one. */
const AHEAD_SHARE_OF_WINDOW = 0.5;
/** How much of the next window a reservation ahead covers, at the region's rate. */
const AHEAD_RESERVE_MS = 10_000;
/** The most a reservation ahead takes of the next window's limit. */
const AHEAD_SHARE_OF_LIMIT = 1 / 8;

/** What the holder's work needs of the hybrid layer. */
export interface HolderLayer {
  readonly inner: Store;
  readonly holder: RegionHolder;
  readonly scheduler: Scheduler;
  /** Recent reservation round trips to the lease region, smoothed. */
  readonly roundTripMs: number;
  /** A reservation sent at `sentAt` (the scheduler's clock) was answered now. */
  measured(sentAt: number): void;
  /** Concurrent requests may wait for a call in flight (not on Workers: `requestScopedIo`). */
  readonly shareInFlight: boolean;
  /** The store's region allowances, where it has them (allowance.ts). */
  readonly allowances: RegionAllowances | undefined;
}

/** The holder's layer over a hybrid layer's refiller (its store, clock and round trips). */
export function holderLayer(
  refiller: Refiller,
  holder: RegionHolder,
  shareInFlight: boolean,
  allowances: RegionAllowances | undefined,
): HolderLayer {
  return {
    inner: refiller.inner,
    holder,
    scheduler: refiller.scheduler,
    get roundTripMs() {
      return refiller.roundTripMs;
    },
    measured: (sentAt) => refiller.measured(sentAt),
    shareInFlight,
    allowances,
  };
}

/**
 * Takes a chunk from the region's holder for each counter of `missing` (its reservation's
 * window: never another's units); concurrent requests of this process wait for the take.
 */
export async function takeChunks(
  layer: HolderLayer,
  counters: readonly CounterSpec[],
  missing: readonly number[],
  reservations: readonly Reservation[],
  now: number,
  progress: StoreCallProgress | undefined,
): Promise<void> {
  const takes = missing.map((i, j) => {
    const reservation = reservations[j] as Reservation;
    const take = takeChunk(layer, reservation, counters[i] as CounterSpec, now, progress);
    whilePending(layer, reservation, take);
    return take;
  });
  await Promise.all(takes);
}

/**
 * One take: what it got is held by the reservation, and the take that left the holder low (or
 * found it short) tops it up in the background. A failed take holds nothing: the request then
 * reserves in the lease item (`reserveForRegion`).
 */
async function takeChunk(
  layer: HolderLayer,
  reservation: Reservation,
  counter: CounterSpec,
  now: number,
  progress: StoreCallProgress | undefined,
): Promise<void> {
  const at = Math.max(now, reservation.start);
  // Before the window's last part, a chunk lasts until it starts: the take there claims the
  // next window ahead.
  const ahead = aheadFrom(layer, reservation);
  const ask = chunkSize(reservation, counter, at, at < ahead ? ahead : reservation.end);
  const index = reservation.index;
  const state = await layer.holder
    .take(counter, ask, at, at >= ahead, progress)
    .catch(() => undefined);
  // The window turned while the take was on its way: what it took belongs to the old window.
  if (state === undefined || reservation.index !== index) return;
  if (state.fullAt !== undefined && state.taken === 0) {
    reservation.regionFullUntil = state.fullAt + FULL_RECHECK_MS;
  }
  reservation.region = state;
  reservation.held += state.taken;
  reservation.reserved += state.taken;
  // Full again when the window ends (a sliding window's count weighs on the next one too), as
  // the store's own answer would say.
  const length = reservation.end - reservation.start;
  reservation.resetAt =
    counter.algorithm === "sliding-window" ? reservation.end + length : reservation.end;
  reservation.storeCount = Math.max(reservation.storeCount, state.storeCount);
  // A store with a holder counts at the caller's stamp: the stamp's window decides
  // (reservation-clock.ts), not the time the units are spent.
  reservation.windowEndsAt = Number.POSITIVE_INFINITY;
  if (state.claimedAhead === true) reserveAhead(layer, reservation, counter, at);
  if (state.taken < counter.cost) return;
  const threshold = Math.max(
    counter.cost,
    regionRate(reservation, at) * layer.roundTripMs * LOW_ROUND_TRIPS,
  );
  // Only the take that brought it below the threshold tops it up: one top-up per crossing,
  // whichever of the region's processes made it.
  if (state.left < threshold && state.left + state.taken >= threshold) {
    topUp(layer, reservation, counter, at, regionSize(reservation, counter, at, 0));
  }
}

/**
 * A counter whose region's holder was marked full lately (the store refused the region with
 * nothing left to give back): refused here without asking the store, for `FULL_RECHECK_MS`
 * after the mark. Undefined when the holder is not full.
 */
export function refusedFull(
  reservation: Reservation,
  counter: CounterSpec,
  now: number,
): CounterState | undefined {
  if (now >= reservation.regionFullUntil) return undefined;
  return refusedState({
    allowed: false,
    count: counter.limit,
    remaining: 0,
    resetAt: reservation.end,
    retryAfterMs: Math.max(1, reservation.regionFullUntil - now),
  });
}

/**
 * The holder had nothing: reserves in the lease item for each counter of `missing`, for the
 * request and for the region (one call), admits the request from what was granted and adds the
 * rest to the holder in the background. Resolves to whether a counter refused the request.
 */
export async function reserveForRegion(
  layer: HolderLayer,
  counters: readonly CounterSpec[],
  missing: readonly number[],
  reservations: readonly Reservation[],
  now: number,
  progress: StoreCallProgress | undefined,
  states: CounterState[],
): Promise<boolean> {
  const asks = missing.map((i, j) => {
    const reservation = reservations[j] as Reservation;
    const counter = counters[i] as CounterSpec;
    const at = Math.max(now, reservation.start);
    // Every process that found the holder empty reserves here: each only a few round trips of
    // the region's rate beyond its request (the next take tops up for the rest of the window).
    const soon = Math.ceil(regionRate(reservation, at) * layer.roundTripMs * LOW_ROUND_TRIPS);
    const size = regionSize(reservation, counter, at, counter.cost);
    return soon > 0 ? Math.min(size, counter.cost + soon) : size;
  });
  const asked = missing.map((i, j) => ({
    ...(counters[i] as CounterSpec),
    cost: asks[j] as number,
    mode: "observe" as const,
  }));
  const sentAt = layer.scheduler.now();
  let filled: Promise<unknown> = Promise.resolve();
  const decided = layer.inner.apply(asked, now, progress).then((answers) => {
    layer.measured(sentAt);
    const fills: Promise<unknown>[] = [];
    const decisions = missing.map((i, j) => {
      const counter = counters[i] as CounterSpec;
      const state = answers[j] as CounterState;
      const ask = asks[j] as number;
      const granted = grantedBy(counter, ask, state);
      if (granted < counter.cost) return refusedState(state);
      const rest = granted - counter.cost;
      if (rest > 0) fills.push(fill(layer, reservations[j] as Reservation, counter, rest, state));
      return ownState(counter, ask, state);
    });
    filled = Promise.allSettled(fills);
    return decisions;
  });
  const landed = decided.then(
    () => filled,
    () => undefined,
  );
  for (const reservation of reservations) whilePending(layer, reservation, landed);
  const decisions = await decided;
  let refused = false;
  await Promise.all(
    missing.map(async (i, j) => {
      let decision = decisions[j] as CounterState;
      const counter = counters[i] as CounterSpec;
      // The lease item has nothing left, but the region's holder may have been topped up since
      // this request found it empty: its cost is taken there before it is refused.
      if (!decision.allowed) {
        const reservation = reservations[j] as Reservation;
        const at = Math.max(now, reservation.start);
        // The lease item answered: a late take that fails leaves its refusal standing (taken for
        // a store failure, the request would be counted on a fresh local count instead).
        const late = await layer.holder
          .take(counter, counter.cost, at, false, progress)
          .catch(() => undefined);
        if (late !== undefined && late.taken >= counter.cost) {
          decision = { ...decision, allowed: true, retryAfterMs: 0 };
        } else if ((decision.heldBack ?? 0) === 0) {
          // Nothing the store could give back: the region's other processes learn it here.
          const ask = asks[j] as number;
          const granted = grantedBy(counter, ask, decision);
          if (ask > granted) layer.allowances?.refund(counter, at, ask - granted).catch(() => 0);
          layer.holder.markFull?.(counter, at).catch(() => undefined);
        } else if (layer.allowances !== undefined) {
          decision = reclaimAllowances(
            layer.allowances,
            counter,
            reservation,
            asks[j] as number,
            decision,
            at,
            layer.roundTripMs * LOW_ROUND_TRIPS,
          );
        }
      }
      states[i] = decision;
      if (!decision.allowed) refused = true;
    }),
  );
  return refused;
}

/**
 * Where the last part of a window starts, in which a take claims reserving the next window
 * ahead for the region: a quarter of the window, and at least a few round trips to the lease.
 */
function aheadFrom(layer: HolderLayer, reservation: Reservation): number {
  const length = reservation.end - reservation.start;
  return (
    reservation.end - Math.max(length * AHEAD_SHARE_OF_WINDOW, LOW_ROUND_TRIPS * layer.roundTripMs)
  );
}

/**
 * The next window, reserved ahead for the region by the take that claimed it: what the region
 * took this window would use in its first part, so that its first requests find units in the
 * holder instead of waiting for the lease region.
 */
function reserveAhead(
  layer: HolderLayer,
  reservation: Reservation,
  counter: CounterSpec,
  at: number,
): void {
  const next = reservation.end;
  const nextLength = windowAt(counter.window, next).end - next;
  const size = Math.min(
    Math.ceil(regionRate(reservation, at) * Math.min(AHEAD_RESERVE_MS, nextLength)),
    Math.floor(counter.limit * AHEAD_SHARE_OF_LIMIT),
  );
  if (size >= counter.cost) topUp(layer, reservation, counter, next, size);
}

/**
 * Reserves `size` for the region in the lease item, in the background, stamped `stamp` (in the
 * window reserved for), and adds what was granted to the holder.
 */
function topUp(
  layer: HolderLayer,
  reservation: Reservation,
  counter: CounterSpec,
  stamp: number,
  size: number,
): Promise<void> {
  const ahead = stamp >= reservation.end;
  if (!ahead && reservation.topping) return Promise.resolve();
  if (!ahead) reservation.topping = true;
  const sentAt = layer.scheduler.now();
  const index = reservation.index;
  return (
    layer.inner
      .apply([{ ...counter, cost: size, mode: "observe" }], stamp)
      .then((answers) => {
        layer.measured(sentAt);
        const state = answers[0] as CounterState;
        const granted = grantedBy(counter, size, state);
        if (granted > 0) return fill(layer, reservation, counter, granted, state);
        return undefined;
      })
      // A failed top-up costs nothing: units it may have reserved stay unspent (capacity lost,
      // never admitted), and the next request that finds the holder empty reserves itself.
      .catch(() => undefined)
      .finally(() => {
        if (!ahead && reservation.index === index) reservation.topping = false;
      })
  );
}

/**
 * Fills the region's holder for the rest of the window at the region's rate, in the background:
 * after a request was admitted from the region's allowance (allowance.ts), for the subject's
 * next requests here.
 */
export function fillRegion(
  layer: HolderLayer,
  reservation: Reservation,
  counter: CounterSpec,
  at: number,
): void {
  // This process's concurrent requests wait for the fill rather than each ask the lease region.
  whilePending(
    layer,
    reservation,
    // At least the next request's cost: a share of a small limit rounds down to nothing.
    topUp(
      layer,
      reservation,
      counter,
      at,
      Math.max(counter.cost, regionSize(reservation, counter, at, 0)),
    ),
  );
}

/** Adds `units` to the holder of the window the store counted them in (`state`). */
async function fill(
  layer: HolderLayer,
  reservation: Reservation,
  counter: CounterSpec,
  units: number,
  state: CounterState,
): Promise<void> {
  const window = storeWindowIndex(counter, state);
  const at = windowStartOf(counter.window, window);
  const filled = await layer.holder.fill(counter, units, state.count, at);
  if (window === reservation.index) {
    reservation.region = filled;
    reservation.storeCount = Math.max(reservation.storeCount, state.count);
  }
}

/** Concurrent requests of this process wait for `call` instead of sending their own. */
function whilePending(layer: HolderLayer, reservation: Reservation, call: Promise<unknown>): void {
  if (!layer.shareInFlight) return;
  const landed = call.then(
    () => undefined,
    () => undefined,
  );
  reservation.pending = landed;
  landed.finally(() => {
    if (reservation.pending === landed) reservation.pending = undefined;
  });
}
