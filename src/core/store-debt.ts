/**
 * What this process admitted on its own while the store was failed, owed to the store: without
 * it, a store that comes back would find a window with none of those admissions in it and admit
 * the limit again.
 *
 * The debt is paid with the next store call for the same counter, as extra cost on it: the
 * store applies it atomically with that request, so the request is admitted only if the limit
 * has room for the debt and for itself, and no concurrent request can slip in between. A call
 * that fails, or that the store answers without counting the counter (a token bucket that
 * refuses, a counter that admitted in a request another refused), leaves the debt owed; one
 * that times out may have counted it, and is paid again: a count one debt too high, never too
 * low.
 *
 * Units belong to time: a fixed window's are owed until it ends; a sliding window's in the next
 * window only at the weight the store gives the previous one; a token bucket's drain at its
 * rate. Hybrid counters are not paid this way (their reservations count ahead of admission).
 */
import type { CounterSpec, CounterState } from "./types.js";
import { windowAt, windowIndexAt, windowLengthMs } from "./windows.js";

interface Owed {
  /** The counter as last counted here (its window, limit and algorithm). */
  counter: CounterSpec;
  units: number;
  /** Epoch ms the units were last brought up to date. */
  at: number;
}

/** A store call's counters with their debts added, and what to settle after it. */
export interface PaidCall {
  readonly counters: readonly CounterSpec[];
  /** By counter index: the debt added to it. */
  readonly paid: readonly (Owed | undefined)[];
}

/** How often expired debts of subjects that never came back are dropped. */
const SWEEP_EVERY_MS = 5_000;

export class StoreDebt {
  readonly #maxKeys: number;
  /** Insertion order is age: past `maxKeys`, the oldest debt is dropped (an undercount). */
  readonly #owed = new Map<string, Owed>();
  #nextSweepAt = 0;
  /** Debts dropped for room since start. */
  dropped = 0;

  constructor(maxKeys: number) {
    this.#maxKeys = maxKeys;
  }

  /** Counters with units owed. */
  get size(): number {
    return this.#owed.size;
  }

  /** Admitted here while the store was failed: `counter.cost` more units owed. */
  add(counter: CounterSpec, now: number): void {
    if (counter.counting === "hybrid") return;
    const owed = this.#owed.get(counter.key);
    if (owed !== undefined) {
      owed.units = unitsAt(owed, now) + counter.cost;
      owed.counter = counter;
      owed.at = now;
      return;
    }
    if (this.#owed.size >= this.#maxKeys) {
      const oldest = this.#owed.keys().next().value as string;
      this.#owed.delete(oldest);
      this.dropped++;
    }
    this.#owed.set(counter.key, { counter, units: counter.cost, at: now });
  }

  /**
   * The counters with what they owe added to their cost, or undefined when none owes anything
   * (the common case: nothing to copy). The debts taken are no longer owed until `settle`
   * gives back those the call did not count.
   */
  take(counters: readonly CounterSpec[], now: number): PaidCall | undefined {
    if (this.#owed.size === 0) return undefined;
    this.#sweep(now);
    let paying: CounterSpec[] | undefined;
    let paid: (Owed | undefined)[] | undefined;
    counters.forEach((counter, i) => {
      if (counter.counting === "hybrid") return;
      const owed = this.#owed.get(counter.key);
      if (owed === undefined) return;
      this.#owed.delete(counter.key);
      owed.units = unitsAt(owed, now);
      owed.at = now;
      if (owed.units === 0) return;
      paying ??= [...counters];
      paid ??= new Array(counters.length);
      paying[i] = { ...counter, cost: counter.cost + owed.units };
      paid[i] = owed;
    });
    return paying === undefined || paid === undefined ? undefined : { counters: paying, paid };
  }

  /**
   * After the call: `states` when the store answered, undefined when it failed. A debt the
   * store did not count is owed again.
   */
  settle(call: PaidCall, states: readonly CounterState[] | undefined): void {
    const admitted =
      states !== undefined &&
      call.counters.every(
        (counter, i) => counter.mode !== "enforce" || (states[i] as CounterState).allowed,
      );
    call.paid.forEach((owed, i) => {
      if (owed === undefined) return;
      const state = states?.[i];
      if (state !== undefined && counted(call.counters[i] as CounterSpec, state, admitted)) return;
      const since = this.#owed.get(owed.counter.key);
      if (since === undefined) {
        this.#owed.set(owed.counter.key, owed);
        return;
      }
      // Owed again meanwhile (the store failed again): both, as of the later of the two.
      const at = Math.max(since.at, owed.at);
      since.units = unitsAt(since, at) + unitsAt(owed, at);
      since.at = at;
    });
  }

  #sweep(now: number): void {
    if (now < this.#nextSweepAt) return;
    this.#nextSweepAt = now + SWEEP_EVERY_MS;
    for (const [key, owed] of this.#owed) if (unitsAt(owed, now) === 0) this.#owed.delete(key);
  }
}

/** Whether the store counted this counter in the call, as the `Store` contract says. */
function counted(counter: CounterSpec, state: CounterState, admitted: boolean): boolean {
  const windowed = counter.algorithm !== "token-bucket";
  if (counter.mode === "observe") return windowed || state.allowed;
  if (admitted) return true;
  return !state.allowed && windowed;
}

/** What `owed` still weighs at `now`. */
function unitsAt(owed: Owed, now: number): number {
  const { counter, units, at } = owed;
  if (now <= at) return units;
  const window = counter.window;
  if (counter.algorithm === "token-bucket") {
    // Units in use drain at the bucket's rate: `limit` per window.
    const drained = ((now - at) * counter.limit) / windowLengthMs(window, at);
    return Math.max(0, Math.ceil(units - drained));
  }
  const then = windowIndexAt(window, at);
  const current = windowAt(window, now);
  if (current.index === then) return units;
  if (counter.algorithm === "sliding-window" && current.index === then + 1) {
    // The store weighs the previous window by the share of it still inside the sliding window.
    const weight = 1 - (now - current.start) / (current.end - current.start);
    return Math.ceil(units * weight);
  }
  return 0;
}
