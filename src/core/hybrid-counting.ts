/**
 * Hybrid counting (`counting: hybrid` on a rule): a process reserves capacity in the store
 * ahead of use and admits from its reservation without a round trip, as Doorman's capacity
 * leases and Envoy's rate limit quota service assign capacity to clients. Over-admission is
 * never possible: every admitted unit was counted in the store first, within the limit. What a
 * reservation costs instead is capacity held here and not used before its window ends: what
 * the subject's rate promised and did not send. Near the limit reservations shrink, so a subject
 * under its limit keeps what it needs (see `reservationSize` in reservation.ts);
 * docs/accuracy.md measures it.
 *
 * - A subject this process has not seen before reserves only what its request costs: one store
 *   call, exactly as `counting: exact`. After that, a subject far from its limit reserves what
 *   its rate here (this window and the one before) would use in the rest of the window, so a
 *   steady subject costs about one call per window in each process that sees it; one on its way
 *   to the limit reserves 2 s ahead.
 * - A reservation is sent as an `observe` counter of cost N: the store counts all N whatever
 *   the outcome (nothing is ever lost), and returns the count after, from which the units
 *   granted follow: `limit - (count - N)`, at most N. A partial grant is kept.
 * - Units belong to the window they were counted in and are dropped when it ends on the store's
 *   clock, whatever this process's clock says (reservation-clock.ts; a sliding window counts the
 *   previous window at a weight below 1, so spending them later would undercount).
 * - What is left is shared in proportion to what each process already took, and a reservation
 *   is the request's own cost once nothing is left: refusals and the challenge band are exact.
 * - What is held is topped up in the background before it runs out, and concurrent requests
 *   wait for one reservation instead of each sending their own (not where the store says
 *   `requestScopedIo`: Workers).
 * - A reservation belongs to one window of one rule: its key is the counter's key with the
 *   rule's limit, algorithm and window, so a reload that changes any of them starts afresh
 *   (the old units stay counted in the store, unused: never spent under the new rule). A
 *   request counted late (stamped before the reservation's window) spends from the newer
 *   window, which is where the store counts it too (see `countedAt` in algorithms/). A grant
 *   the store counted in another window than the reservation's (a store whose items are per
 *   window, a clock behind another process's) admits only the request that asked for it.
 * - A region holder, where the store has one (`Store.holder`, hybrid/holder.ts): a process takes
 *   its units from its region's holder (one local conditional write) instead of reserving in
 *   the lease region; the holder is topped up from the store in the background, the next window
 *   reserved ahead; only a request that finds it empty waits for a reservation.
 * - Resets reach every process. Where the store can reset counters, held units are leased:
 *   spendable for `leaseMs` after the reservation was sent, renewed in the background while the
 *   subject is busy. A reset raises a fence in the store (a counter beside the reset one that
 *   every reservation reads), waits until every lease granted before it has run out, then
 *   resets: no unit counted before a reset is ever spent after it. While the fence is up,
 *   reservations hold nothing (exact counting), and a process that sees it drops what it held.
 *
 * The layer is built where a store is made, `hybridCounting(store)`, and is a store itself:
 * `createLimiter` refuses a policy with hybrid rules on a remote store that is not wrapped.
 * In-process stores count exactly already: `hybridCounting` returns them as they are.
 */
import { REAL_SCHEDULER, type Scheduler } from "./deadline.js";
import { EdgelimitError } from "./errors.js";
import { GenerationalCache } from "./generational-cache.js";
import { MAX_WAITS, roundTripOf } from "./hybrid/budget.js";
import { FENCE_MARGIN_MS, RecentResets, raiseFences } from "./hybrid/fence.js";
import { type HolderLayer, holderLayer } from "./hybrid/holder.js";
import { type Refiller, refillIfLow } from "./hybrid/refill.js";
import { reserveThroughRegion } from "./hybrid/region-path.js";
import { reserveInStore } from "./hybrid/reserve.js";
import { giveBack, isHybrid, NOT_ASKED, specOf, type Taken, takeHeld } from "./hybrid/spend.js";
import { checkHybridArguments, type HybridOptions } from "./hybrid-options.js";
import { positiveMs } from "./options.js";

export type { HybridOptions } from "./hybrid-options.js";

import { newReservation, type Reservation, reservationSize } from "./reservation.js";
import type {
  CounterSpec,
  CounterState,
  RegionAllowances,
  Store,
  StoreCallProgress,
  StoreTraits,
} from "./types.js";

/** A reservation's round trip before one was measured. */
const INITIAL_ROUND_TRIP_MS = 100;
export const DEFAULT_LEASE_MS = 10_000;
export class HybridCounting implements Store {
  readonly name: string;
  readonly traits: StoreTraits;
  /** The inner store's log of resets, where it keeps one (reservations need none). */
  readonly followResets: Store["followResets"];
  readonly overrides: Store["overrides"];
  readonly #inner: Store;
  readonly #reserveMs: number;
  readonly #clock: () => number;
  readonly #scheduler: Scheduler;
  /** 0 where the store cannot reset: nothing to wait out, units are held to their window's end. */
  readonly #leaseMs: number;
  /** workerd: a reservation in flight is never shared (see `StoreTraits.requestScopedIo`). */
  readonly #requestScopedIo: boolean;
  /** Recent reservation round trips, smoothed: how early to reserve again (see `#refill`). */
  #roundTripMs = INITIAL_ROUND_TRIP_MS;
  /** By counter key, then by rule (`specOf`): a pass holder's band is a rule of its own. */
  readonly #reservations: GenerationalCache<Map<string, Reservation>>;
  /** Counters this process reset, while their fences may be up. */
  readonly #resets = new RecentResets();
  /** What a background top-up needs of this layer (refill.ts). */
  readonly #refiller: Refiller;
  /** The store's region holder, where it has one and resets need no leases (holder.ts). */
  readonly #holder: HolderLayer | undefined;
  /** The store's region allowances, where it has them (hybrid/allowance.ts). */
  readonly #allowances: RegionAllowances | undefined;

  constructor(inner: Store, options: HybridOptions = {}) {
    this.#inner = inner;
    this.name = inner.name;
    this.followResets = inner.followResets?.bind(inner);
    this.overrides = inner.overrides?.bind(inner);
    this.#reserveMs = options.reserveMs ?? Number.POSITIVE_INFINITY;
    this.#clock = options.clock ?? Date.now;
    this.#scheduler = options.scheduler ?? REAL_SCHEDULER;
    const leaseMs = positiveMs(options.leaseMs ?? DEFAULT_LEASE_MS, "hybrid counting", "leaseMs");
    this.#leaseMs = inner.reset === undefined ? 0 : leaseMs;
    this.#reservations = new GenerationalCache(Math.max(1, (options.maxKeys ?? 20_000) / 2));
    const own = inner.traits ?? {};
    this.#requestScopedIo = own.requestScopedIo === true;
    const roundTrip = own.roundTripMs;
    this.traits = {
      hybrid: true,
      requestScopedIo: this.#requestScopedIo,
      roundTripMs:
        roundTrip === undefined ? undefined : (counters) => roundTripOf(counters, roundTrip),
      status: own.status,
    };
    const layer = this;
    this.#refiller = {
      inner,
      scheduler: this.#scheduler,
      leaseMs: this.#leaseMs,
      get roundTripMs() {
        return layer.#roundTripMs;
      },
      measured: (sent) => this.#measured(sent),
      sizeFor: (reservation, counter, now) => this.#reservationFor(reservation, counter, now),
    };
    const holder = this.#leaseMs === 0 ? inner.holder : undefined;
    this.#allowances = this.#leaseMs === 0 ? inner.allowances : undefined;
    this.#holder =
      holder === undefined
        ? undefined
        : holderLayer(this.#refiller, holder, !this.#requestScopedIo, this.#allowances);
  }

  apply(
    counters: readonly CounterSpec[],
    now: number,
    progress?: StoreCallProgress,
  ): Promise<CounterState[]> {
    if (!counters.some(isHybrid)) return this.#inner.apply(counters, now, progress);
    return this.#applyHybrid(counters, now, progress);
  }

  /**
   * Forgets the counters everywhere. This process drops its reservations for them (every rule of
   * each key: the challenge band's too). Where a hybrid counter is reset, the other processes
   * may still hold units for it: a fence tells them at their next reservation, and the reset
   * waits until every lease granted before the fence has run out (`leaseMs`) before the store
   * forgets the count.
   */
  async reset(counters: readonly CounterSpec[], now?: number): Promise<void> {
    const inner = this.#inner;
    if (inner.reset === undefined) {
      throw new EdgelimitError(
        "EL_NO_RESET",
        `the ${inner.name} store cannot reset counters; use the memory or Redis store for limiter.reset`,
      );
    }
    this.#forget(counters);
    await raiseFences(inner, counters, this.#leaseMs, this.#clock(), this.#scheduler);
    await inner.reset(counters, now);
    // What this process reserved during the fence was spent by the requests that asked for it.
    // Its next reservations read the fence until it is down, and hold nothing until then.
    this.#forget(counters);
    this.#resets.add(counters, this.#clock() + this.#leaseMs + FENCE_MARGIN_MS);
  }

  async close(): Promise<void> {
    await this.#inner.close?.();
  }

  #forget(counters: readonly CounterSpec[]): void {
    for (const counter of counters) this.#reservations.delete(counter.key);
  }

  async #applyHybrid(
    counters: readonly CounterSpec[],
    now: number,
    progress: StoreCallProgress | undefined,
  ): Promise<CounterState[]> {
    const states: CounterState[] = new Array(counters.length);
    const taken: Taken[] = [];
    try {
      let refused = await this.#reserveAll(counters, now, progress, states, taken);
      const rest: number[] = [];
      counters.forEach((counter, i) => {
        if (!isHybrid(counter) && (!refused || counter.mode === "observe")) rest.push(i);
        else if (states[i] === undefined) states[i] = NOT_ASKED;
      });
      if (rest.length > 0) {
        const answers = await this.#inner.apply(
          rest.map((i) => counters[i] as CounterSpec),
          now,
          progress,
        );
        rest.forEach((i, j) => {
          const state = answers[j] as CounterState;
          states[i] = state;
          if (!state.allowed && (counters[i] as CounterSpec).mode === "enforce") refused = true;
        });
      }
      if (refused) giveBack(taken, counters, states);
      else {
        for (const { reservation, counter } of taken) this.#refillIfLow(reservation, counter, now);
      }
      return states;
    } catch (error) {
      giveBack(taken, counters, undefined);
      throw error;
    }
  }

  /**
   * Takes every hybrid counter's cost from its reservation, reserving more where there is too
   * little. Resolves to whether one of them refused.
   */
  async #reserveAll(
    counters: readonly CounterSpec[],
    now: number,
    progress: StoreCallProgress | undefined,
    states: CounterState[],
    taken: Taken[],
  ): Promise<boolean> {
    let missing: number[] = [];
    counters.forEach((counter, i) => {
      if (
        isHybrid(counter) &&
        !this.#take(this.#reservationOf(counter, now), counter, states, taken, i)
      ) {
        missing.push(i);
      }
    });
    // Another request may be reserving for the same subject: wait for it, telling it what we
    // want, and take from what it brings. Bounded, so a request is never starved by others.
    const waits = this.#requestScopedIo ? 0 : MAX_WAITS;
    for (let round = 0; missing.length > 0 && round < waits; round++) {
      const waiting = missing.map((i) => this.#reservationOf(counters[i] as CounterSpec, now));
      const pending = waiting.filter((reservation) => reservation.pending !== undefined);
      if (pending.length === 0) break;
      missing.forEach((i, j) => {
        (waiting[j] as Reservation).wanted += (counters[i] as CounterSpec).cost;
      });
      await Promise.allSettled(pending.map((reservation) => reservation.pending));
      missing.forEach((i, j) => {
        (waiting[j] as Reservation).wanted -= (counters[i] as CounterSpec).cost;
      });
      missing = missing.filter(
        (i, j) =>
          !this.#take(waiting[j] as Reservation, counters[i] as CounterSpec, states, taken, i),
      );
    }
    if (missing.length === 0) return false;
    const holder = this.#holder;
    const reservationOf = (counter: CounterSpec) => this.#reservationOf(counter, now);
    const take = (reservation: Reservation, i: number) =>
      this.#take(reservation, counters[i] as CounterSpec, states, taken, i);
    const allowances = this.#allowances;
    if (holder === undefined) {
      const refiller = this.#refiller;
      const shared = !this.#requestScopedIo;
      const path = { refiller, shared, allowances, reservationOf, take };
      return reserveInStore(path, counters, missing, now, progress, states);
    }
    const path = { holder, allowances, reservationOf, take };
    return reserveThroughRegion(path, counters, missing, now, progress, states);
  }

  /**
   * The reservation for `counter` in the window of `now` (a new window starts empty). A request
   * stamped before the reservation's window (counted late) spends from it: the store too counts
   * it in that newer window.
   */
  #reservationOf(counter: CounterSpec, now: number): Reservation {
    let rules = this.#reservations.get(counter.key);
    if (rules === undefined) {
      rules = new Map();
      this.#reservations.set(counter.key, rules);
    }
    const spec = specOf(counter);
    const reservation = rules.get(spec);
    if (reservation !== undefined && now < reservation.end) return reservation;
    const next = newReservation(reservation, counter.window, now);
    if (reservation === undefined && this.#resets.fenced(counter.key, now)) next.fenced = true;
    rules.set(spec, next);
    return next;
  }

  #reservationFor(reservation: Reservation, counter: CounterSpec, now: number): number {
    // Behind a reset's fence nothing is held: units asked beyond the request's own would be
    // counted in the store and never spent.
    if (reservation.fenced) return counter.cost;
    return reservationSize(reservation, counter, Math.max(now, reservation.start), this.#reserveMs);
  }

  /** Tops up in the background a busy subject's reservation that is running low (refill.ts). */
  #refillIfLow(reservation: Reservation, counter: CounterSpec, now: number): void {
    if (this.#requestScopedIo) return;
    // With a region holder, a take that leaves it low tops it up (hybrid/holder.ts).
    if (this.#holder === undefined) refillIfLow(this.#refiller, reservation, counter, now);
  }

  #measured(sent: number): void {
    const took = Math.max(0, this.#scheduler.now() - sent);
    this.#roundTripMs = this.#roundTripMs * 0.8 + took * 0.2;
  }

  #take(
    reservation: Reservation | undefined,
    counter: CounterSpec | undefined,
    states: CounterState[],
    taken: Taken[],
    at: number,
  ): boolean {
    if (reservation === undefined || counter === undefined) return false;
    const now = this.#scheduler.now();
    return takeHeld(reservation, counter, states, taken, at, now, this.#leaseMs > 0);
  }
}

/**
 * Hybrid counting in front of `store`, where the store is made: what a policy with
 * `counting: hybrid` rules needs (`createLimiter` says so otherwise). A store in this process
 * (`StoreTraits.applySync`) counts exactly at no cost and is returned as it is.
 */
export function hybridCounting(store: Store, options?: HybridOptions): Store {
  if (typeof EDGELIMIT_BUNDLE === "undefined") checkHybridArguments(store, options);
  if (store.traits?.applySync !== undefined || store.traits?.hybrid === true) return store;
  return new HybridCounting(store, options);
}
