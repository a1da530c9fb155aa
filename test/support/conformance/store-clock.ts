/**
 * Histories on the store's clock (`History.storeClock`): the store counts on a clock of its own,
 * as Redis does with `TIME` and a Durable Object with its own, and each process's clock is off
 * from it. The store's clock is the history's time. A process's monotonic clock (the scheduler
 * its hybrid layer measures round trips, leases and the store's windows on) runs on that time
 * too: two real clocks disagree on the time, not on how much of it passed.
 */
import { afterPendingIo, type Scheduler } from "../../../src/core/deadline.js";
import type {
  CounterSpec,
  CounterState,
  Store,
  StoreCallProgress,
} from "../../../src/core/types.js";

/** The history's time, which its steps advance. */
export class HistoryClock {
  time: number;

  constructor(start: number) {
    this.time = start;
  }

  /** A process's monotonic clock and timers on the history's time: a timer moves it on to when it is due. */
  scheduler(): Scheduler {
    return {
      now: () => this.time,
      setTimeout: (callback, ms) => {
        const due = this.time + ms;
        return setTimeout(() => {
          this.time = Math.max(this.time, due);
          callback();
        }, 0);
      },
      clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
      afterPendingIo,
    };
  }
}

/**
 * The target's store counting on the history's time, whatever its caller stamped: it is called
 * with the store's clock as the time to count at, and its answer tells that time (`storeNow`)
 * where the store does not tell its own, as a store with a clock of its own does.
 */
export class OwnClockStore implements Store {
  readonly name: string;
  readonly traits: Store["traits"];
  readonly #inner: Store;
  readonly #clock: HistoryClock;
  reset?: (counters: readonly CounterSpec[]) => Promise<void>;

  constructor(inner: Store, clock: HistoryClock) {
    this.#inner = inner;
    this.#clock = clock;
    this.name = inner.name;
    // A store that counts hybrid rules itself stays so (its hybrid layer is not doubled).
    this.traits = inner.traits?.hybrid === true ? { hybrid: true } : undefined;
    if (inner.reset !== undefined)
      this.reset = (counters) => inner.reset?.(counters) as Promise<void>;
  }

  async apply(
    counters: readonly CounterSpec[],
    _callerNow: number,
    progress?: StoreCallProgress,
  ): Promise<CounterState[]> {
    const now = this.#clock.time;
    const states = await this.#inner.apply(counters, now, progress);
    return states.map((state) =>
      state.storeNow === undefined ? { ...state, storeNow: now } : state,
    );
  }
}
