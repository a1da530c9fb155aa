/**
 * What one process holds for one hybrid counter in one window, and how much it reserves next:
 * the sizing that docs/accuracy.md measured (core/hybrid-counting.ts uses it).
 */
import type { CounterSpec, CounterState, HolderState, WindowSpec } from "./types.js";
import { windowAt, windowIndexAt, windowStartOf } from "./windows.js";

/**
 * Of what the store said was left, the most one reservation takes before this process knows
 * its share of the subject's traffic (its first reservation in a window).
 */
const FIRST_SHARE_OF_REMAINING = 1 / 8;
/**
 * A rate is measured over at least this long (or a tenth of a shorter window), so that two
 * quick requests are not taken for a flood that would reserve capacity nobody uses.
 */
const MIN_RATE_SPAN_MS = 10_000;
/**
 * A subject whose count in the store, at the rate it grows, would pass this share of what is
 * left before the window ends is on its way to the limit.
 */
const CROWDED_SHARE_OF_REMAINING = 0.5;
/** How far ahead a subject on its way to the limit reserves (docs/accuracy.md measures it). */
const CROWDED_RESERVE_MS = 2000;

export interface Reservation {
  /** The window the held units were counted in. */
  index: number;
  start: number;
  end: number;
  /** Units counted in the store for this process and not admitted yet. */
  held: number;
  /** Units admitted from reservations in this window. */
  used: number;
  /**
   * When this process first saw the subject in the window: its rate is measured from there, not
   * from the window's start, or a subject that turns busy late in a long window would be taken
   * for a fraction of its rate and reserve a fraction of what it needs.
   */
  firstSeen: number;
  /** Units admitted here in the window just before, and its length (0 when there was none). */
  previousUsed: number;
  previousSpan: number;
  /** How long this process saw the subject in the window before: its first request to the end. */
  previousSeenSpan: number;
  /** The store's count right after this process's last reservation. */
  storeCount: number;
  /** Units the store granted this process in this window. */
  reserved: number;
  /** `storeCount` as the window before ended here (how busy the subject was everywhere). */
  previousStoreCount: number;
  resetAt: number;
  /** A reservation on its way: concurrent requests wait for it instead of sending their own. */
  pending: Promise<void> | undefined;
  /** Units that requests waiting for `pending` want: the next reservation covers them. */
  wanted: number;
  /**
   * Until when (the scheduler's monotonic ms) what is held may be spent, where the store can
   * reset counters (see hybrid-counting.ts): a reset waits for every lease to run out.
   */
  leaseEnd: number;
  /**
   * When the store's window that `held` was counted in ends, on the scheduler's monotonic clock
   * (see reservation-clock.ts): nothing held is spent after it.
   */
  windowEndsAt: number;
  /**
   * The last answer showed a reset's fence up (see hybrid-counting.ts): nothing is held, and each
   * request reserves only its own cost, until an answer shows it down.
   */
  fenced: boolean;
  /**
   * The region holder as this process last saw it in this window (hybrid/holder.ts), and what
   * the region took from it in the window before (0 when there was none).
   */
  region: HolderState | undefined;
  previousRegionTaken: number;
  /** A top-up of the region holder sent by this process is on its way. */
  topping: boolean;
  /** This process asked to reserve the next window ahead for the region (once per window). */
  aheadAsked: boolean;
  /**
   * Region allowances (hybrid/allowance.ts), once per window each: this process tried to spend
   * its region's, and it reclaimed the unspent ones at the limit.
   */
  allowanceTried: boolean;
  reclaimed: boolean;
  /**
   * Until when (the request stamps' clock) the region's holder is marked full in this window:
   * refused here without asking the store (0: not full).
   */
  regionFullUntil: number;
}

/** A reservation for the window of `now`, following `previous` (the same counter's last one). */
export function newReservation(
  previous: Reservation | undefined,
  window: WindowSpec,
  now: number,
): Reservation {
  const bounds = windowAt(window, now);
  const follows = previous !== undefined && previous.end === bounds.start;
  return {
    index: bounds.index,
    start: bounds.start,
    end: bounds.end,
    held: 0,
    used: 0,
    firstSeen: Math.max(now, bounds.start),
    previousUsed: follows ? previous.used : 0,
    previousSpan: follows ? bounds.start - previous.start : 0,
    previousSeenSpan: follows ? previous.end - Math.max(previous.start, previous.firstSeen) : 0,
    storeCount: 0,
    reserved: 0,
    previousStoreCount: follows ? previous.storeCount : 0,
    resetAt: bounds.end,
    pending: undefined,
    wanted: 0,
    leaseEnd: 0,
    windowEndsAt: 0,
    fenced: follows ? previous.fenced : false,
    region: undefined,
    previousRegionTaken:
      follows && previous.region !== undefined ? previous.region.granted - previous.region.left : 0,
    topping: false,
    aheadAsked: false,
    allowanceTried: false,
    reclaimed: false,
    regionFullUntil: 0,
  };
}

/**
 * Units to reserve for a request of `counter.cost`: its cost, plus what the rate this process
 * admitted the subject at (this window so far and the one before) uses in the rest of the
 * window (or `reserveMs`), at most a share of what the store last said was left; and what
 * the requests waiting for a reservation want, within what was left.
 */
export function reservationSize(
  reservation: Reservation,
  counter: CounterSpec,
  now: number,
  reserveMs: number,
): number {
  const rate = rateOf(reservation, now);
  const left = Math.max(0, counter.limit - reservation.storeCount - counter.cost);
  // A subject on its way to the limit (by the store's count, which every process adds to)
  // reserves only `CROWDED_RESERVE_MS` ahead: what processes hold when the limit is reached is
  // what none may use, so it must stay small. One far from its limit reserves for the rest of
  // the window, which is what makes a subject seen by many processes cheap.
  const sinceStart = Math.max(MIN_RATE_SPAN_MS / 10, now - reservation.start);
  const storeRate = Math.max(
    reservation.storeCount / sinceStart,
    reservation.previousSpan > 0 ? reservation.previousStoreCount / reservation.previousSpan : 0,
  );
  const crowded =
    storeRate === 0 || storeRate * (reservation.end - now) > left * CROWDED_SHARE_OF_REMAINING;
  const horizon = Math.min(
    reserveMs,
    reservation.end - now,
    crowded ? CROWDED_RESERVE_MS : Number.POSITIVE_INFINITY,
  );
  // What is left is shared by every process that reserves for the subject, in proportion to
  // what each has taken so far (this process's part of the store's count): together they
  // never hold much more than is left, so what a process holds and never uses stays small.
  const share =
    reservation.storeCount > 0
      ? reservation.reserved / reservation.storeCount
      : FIRST_SHARE_OF_REMAINING;
  const extra = Math.min(Math.ceil(rate * horizon), Math.floor(left * share));
  const ask = counter.cost + Math.max(0, extra, Math.min(reservation.wanted, left));
  return Number.isSafeInteger(ask) ? ask : counter.cost;
}

/** Units per ms this process admitted the subject at, this window so far and the one before. */
export function rateOf(reservation: Reservation, now: number): number {
  const minSpan = Math.min(MIN_RATE_SPAN_MS, (reservation.end - reservation.start) / 10);
  const elapsed = Math.max(minSpan, now - Math.max(reservation.start, reservation.firstSeen));
  return (reservation.used + reservation.previousUsed) / (elapsed + reservation.previousSeenSpan);
}

/**
 * The window the store counted a reservation's units in, from its answer: the window the answer
 * ends (a sliding window's answer ends the window after, when that one's weight has faded too).
 * It is not always the reservation's: a store whose items are per window counts a request
 * stamped before the reservation's window in the older one, and a store with a clock of its own
 * (Redis `TIME`, a Durable Object) may be in the next window while this process is not.
 */
export function storeWindowIndex(counter: CounterSpec, state: CounterState): number {
  const ending = windowIndexAt(counter.window, state.resetAt - 1);
  return counter.algorithm === "sliding-window" ? ending - 1 : ending;
}

/**
 * Moves a reservation to a later window the store is already counting in (its clock is ahead
 * of ours): what it held belonged to the window it leaves and is dropped; requests stamped
 * before the new window spend from it, as the store counts them there.
 */
export function moveReservation(reservation: Reservation, window: WindowSpec, index: number): void {
  const start = windowStartOf(window, index);
  const moved = newReservation(reservation, window, start);
  reservation.index = moved.index;
  reservation.start = moved.start;
  reservation.end = moved.end;
  reservation.held = 0;
  reservation.used = 0;
  reservation.firstSeen = moved.firstSeen;
  reservation.previousUsed = moved.previousUsed;
  reservation.previousSpan = moved.previousSpan;
  reservation.previousSeenSpan = moved.previousSeenSpan;
  reservation.storeCount = 0;
  reservation.reserved = 0;
  reservation.previousStoreCount = moved.previousStoreCount;
  reservation.resetAt = moved.resetAt;
  reservation.leaseEnd = 0;
  reservation.windowEndsAt = 0;
  reservation.fenced = moved.fenced;
  reservation.region = undefined;
  reservation.previousRegionTaken = moved.previousRegionTaken;
  reservation.aheadAsked = false;
  reservation.allowanceTried = false;
  reservation.reclaimed = false;
  reservation.regionFullUntil = 0;
}

/**
 * The units a store's answer to a reservation of `asked` units grants: it counted them all
 * (an `observe` counter), and what it had counted before them leaves `limit - (count - asked)`,
 * at most `asked`.
 */
export function grantedBy(
  counter: Pick<CounterSpec, "limit">,
  asked: number,
  state: Pick<CounterState, "count">,
): number {
  return Math.max(0, Math.min(asked, counter.limit - (state.count - asked)));
}

/**
 * Holds what the store granted for a reservation of `asked` units, sent as an observe counter
 * (counted in full whatever the outcome): the part of it that fits under the limit.
 */
export function addGrant(
  reservation: Reservation,
  counter: CounterSpec,
  asked: number,
  state: CounterState,
): void {
  const granted = grantedBy(counter, asked, state);
  reservation.held += granted;
  reservation.reserved += granted;
  reservation.storeCount = Math.max(reservation.storeCount, state.count);
  reservation.resetAt = state.resetAt;
}
