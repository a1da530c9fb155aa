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
 * - Units belong to the window they were counted in and are dropped when it ends (a sliding
 *   window counts the previous window at a weight below 1, so spending them later would
 *   undercount).
 * - What is left is shared in proportion to what each process already took, and a reservation
 *   is the request's own cost once nothing is left: refusals and the challenge band are exact.
 * - What is held is topped up in the background before it runs out, and concurrent requests
 *   wait for one reservation instead of each sending their own (not where the store says
 *   `requestScopedIo`: Workers).
 *
 * The layer sits in front of a remote store behind the same contract; in-process stores count
 * exactly already and are never wrapped (see `DecisionEngine`).
 */
import { GenerationalCache } from "./generational-cache.js";
import {
  addGrant,
  newReservation,
  type Reservation,
  rateOf,
  reservationSize,
} from "./reservation.js";
import type { CounterSpec, CounterState, Store, StoreCallProgress } from "./types.js";

export interface HybridOptions {
  /** The clock round trips are measured with, in ms (default `performance.now`). */
  readonly clock?: () => number;
  /** At most how far ahead one reservation covers a subject's rate (default: the rest of its window). */
  readonly reserveMs?: number;
  /** Subjects whose reservations are held (default 20,000; a forgotten one strands its units). */
  readonly maxKeys?: number;
}

/** A reservation's round trip before one was measured. */
const INITIAL_ROUND_TRIP_MS = 100;
/**
 * Reserve again, in the background, once what is held would last less than this many round
 * trips at the subject's rate: a busy subject then never waits for a reservation.
 */
const REFILL_ROUND_TRIPS = 3;
/**
 * Times a request waits for another's reservation before it sends its own: twice, so that
 * requests that were all short when one reservation landed wait for a single next one (sent by
 * the first of them, covering what they all want) instead of each sending its own. A request
 * takes at most three round trips for its reservation (see `expectedRoundTripMsFor`).
 */
const MAX_WAITS = 2;

/** What a request took from a reservation, to give back if another counter refuses it. */
interface Taken {
  readonly reservation: Reservation;
  readonly counter: CounterSpec;
}

const NOT_ASKED: CounterState = Object.freeze({
  allowed: true,
  count: 0,
  remaining: 0,
  resetAt: 0,
  retryAfterMs: 0,
  // Never disclosed: the request was refused before this counter was asked.
  approximate: true,
});

export class HybridCounting implements Store {
  readonly name: string;
  readonly local = false;
  readonly #inner: Store;
  readonly #reserveMs: number;
  readonly #clock: () => number;
  /** Recent reservation round trips, smoothed: how early to reserve again (see `#refill`). */
  #roundTripMs = INITIAL_ROUND_TRIP_MS;
  readonly #reservations: GenerationalCache<Reservation>;

  constructor(inner: Store, options: HybridOptions = {}) {
    this.#inner = inner;
    this.name = inner.name;
    this.#reserveMs = options.reserveMs ?? Number.POSITIVE_INFINITY;
    this.#clock = options.clock ?? (() => performance.now());
    this.#reservations = new GenerationalCache(Math.max(1, (options.maxKeys ?? 20_000) / 2));
  }

  get expectedRoundTripMs(): number {
    return this.#inner.expectedRoundTripMs ?? 0;
  }

  /**
   * A request with hybrid counters may wait for two other reservations, then reserve itself,
   * then count its exact counters: up to three round trips to where reservations live and one
   * to where the rest is counted. Its budget is added to all of them.
   */
  expectedRoundTripMsFor(counters: readonly CounterSpec[]): number {
    const roundTrip = (subset: readonly CounterSpec[]): number =>
      this.#inner.expectedRoundTripMsFor?.(subset) ?? this.expectedRoundTripMs;
    if (!counters.some(isHybrid)) return roundTrip(counters);
    const hybrid = counters.filter(isHybrid);
    const rest = counters.filter((counter) => !isHybrid(counter));
    return (MAX_WAITS + 1) * roundTrip(hybrid) + (rest.length > 0 ? roundTrip(rest) : 0);
  }

  apply(
    counters: readonly CounterSpec[],
    now: number,
    progress?: StoreCallProgress,
  ): Promise<CounterState[]> {
    if (!counters.some(isHybrid)) return this.#inner.apply(counters, now, progress);
    return this.#applyHybrid(counters, now, progress);
  }

  async reset(counters: readonly CounterSpec[]): Promise<void> {
    for (const counter of counters) this.#reservations.delete(reservationKey(counter));
    if (this.#inner.reset === undefined) {
      throw new Error(`the ${this.#inner.name} store cannot reset counters`);
    }
    await this.#inner.reset(counters);
  }

  async close(): Promise<void> {
    await this.#inner.close?.();
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
    const waits = this.#inner.requestScopedIo === true ? 0 : MAX_WAITS;
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
    return this.#reserve(counters, missing, now, progress, states, taken);
  }

  /** One store call reserving for every counter in `missing`; admits from what is granted. */
  async #reserve(
    counters: readonly CounterSpec[],
    missing: readonly number[],
    now: number,
    progress: StoreCallProgress | undefined,
    states: CounterState[],
    taken: Taken[],
  ): Promise<boolean> {
    const reservations = missing.map((i) => this.#reservationOf(counters[i] as CounterSpec, now));
    const asks = missing.map((i, j) =>
      this.#reservationFor(reservations[j] as Reservation, counters[i] as CounterSpec, now),
    );
    const call = this.#inner.apply(
      missing.map((i, j) => ({
        ...(counters[i] as CounterSpec),
        cost: asks[j] as number,
        mode: "observe" as const,
      })),
      now,
      progress,
    );
    const sent = this.#clock();
    const landed = call.then(
      () => this.#measured(sent),
      () => undefined,
    );
    if (this.#inner.requestScopedIo !== true) {
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
    missing.forEach((i, j) => {
      const counter = counters[i] as CounterSpec;
      const reservation = reservations[j] as Reservation;
      const asked = asks[j] as number;
      const state = answers[j] as CounterState;
      addGrant(reservation, counter, asked, state);
      if (this.#take(reservation, counter, states, taken, i)) return;
      refused = true;
      states[i] = {
        allowed: false,
        count: state.count,
        remaining: 0,
        resetAt: state.resetAt,
        retryAfterMs: Math.max(1, state.retryAfterMs),
      };
    });
    return refused;
  }

  /** The reservation for `counter` in the window of `now` (a new window starts empty). */
  #reservationOf(counter: CounterSpec, now: number): Reservation {
    const key = reservationKey(counter);
    const reservation = this.#reservations.get(key);
    if (reservation !== undefined && now < reservation.end && now >= reservation.start) {
      return reservation;
    }
    const next = newReservation(reservation, counter.window, now);
    this.#reservations.set(key, next);
    return next;
  }

  #reservationFor(reservation: Reservation, counter: CounterSpec, now: number): number {
    return reservationSize(reservation, counter, now, this.#reserveMs);
  }

  /**
   * Reserves again in the background when what is held would not last `REFILL_ROUND_TRIPS`
   * round trips at the subject's rate, so that the next requests find units instead of waiting
   * (and, on Lambda@Edge, instead of spilling to new instances that would each reserve).
   */
  #refillIfLow(reservation: Reservation, counter: CounterSpec, now: number): void {
    // A subject seen once is not busy yet: its next request reserves for itself if it comes.
    if (
      this.#inner.requestScopedIo === true ||
      reservation.pending !== undefined ||
      reservation.used + reservation.previousUsed < 2
    )
      return;
    const rate = rateOf(reservation, now);
    if (reservation.held >= rate * this.#roundTripMs * REFILL_ROUND_TRIPS) return;
    const ask = this.#reservationFor(reservation, counter, now) - counter.cost;
    if (ask <= 0) return;
    const sent = this.#clock();
    const landed = this.#inner
      .apply([{ ...counter, cost: ask, mode: "observe" }], now)
      .then(
        ([state]) => {
          this.#measured(sent);
          if (state !== undefined) addGrant(reservation, counter, ask, state);
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

  #measured(sent: number): void {
    const took = Math.max(0, this.#clock() - sent);
    this.#roundTripMs = this.#roundTripMs * 0.8 + took * 0.2;
  }

  #take(
    reservation: Reservation,
    counter: CounterSpec,
    states: CounterState[],
    taken: Taken[],
    at: number,
  ): boolean {
    // Written so that a count that is not a number can never admit.
    if (!(reservation.held >= counter.cost)) return false;
    reservation.held -= counter.cost;
    reservation.used += counter.cost;
    taken.push({ reservation, counter });
    // What this process knows: the store's count at its last reservation, less what it holds.
    const count = Math.min(counter.limit, Math.max(0, reservation.storeCount - reservation.held));
    states[at] = {
      allowed: true,
      count,
      remaining: Math.max(0, counter.limit - count),
      resetAt: reservation.resetAt,
      retryAfterMs: 0,
    };
    return true;
  }
}

function isHybrid(counter: CounterSpec): boolean {
  return counter.counting === "hybrid" && counter.mode === "enforce";
}

/**
 * A pass holder's counter has a higher limit (the challenge band) on the same key: units
 * reserved under one limit are never spent under the other.
 */
function reservationKey(counter: CounterSpec): string {
  return `${counter.key}\u0000${counter.limit}`;
}

/** The request was refused, or failed: what it took from reservations is held again. */
function giveBack(
  taken: readonly Taken[],
  counters: readonly CounterSpec[],
  states: CounterState[] | undefined,
): void {
  for (const { reservation, counter } of taken) {
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
