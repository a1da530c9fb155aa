/**
 * The decision budget: how long a decision waits for its store, measured so that only the
 * store's own slowness spends it.
 *
 * A plain `setTimeout` races the store's reply, and in a busy process it wins when it should
 * not: a loop iteration runs its due timers before it reads the sockets that became readable,
 * so a reply that arrived in time, but waited behind a burst of our own work, would be taken for
 * a store that never answered. Three things here keep our slowness out of the store's time:
 *
 * - a timer that has fired declares nothing yet: it first lets the I/O that is already waiting
 *   be read (`afterPendingIo`), and only a reply that is still missing then is late;
 * - the time the store spends setting up a connection for the call (a fresh instance's TCP and
 *   TLS handshake) is bounded by its own, larger budget, and the store budget starts when the
 *   request has been written (`StoreCallProgress.connecting`);
 * - the known round trip to the store (`Store.expectedRoundTripMs`, a far replica) is added.
 *
 * So the budget is a lower bound on how long a decision waits for a store that has not answered,
 * and a reply that is in our process by the time we look is always used.
 */
import { EdgelimitError } from "./errors.js";

/** What a store tells the budget about one call while it is in flight. */
export interface StoreCallProgress {
  /**
   * The store is setting up a connection for this call (no request has left yet). The store
   * budget waits, up to the connect budget, and starts again when the returned function is
   * called: once the request has been written on the connection, or the setup has failed.
   */
  connecting(): () => void;
  /**
   * True once the decision has stopped waiting for this call (it failed or missed its budget).
   * A store that has been waiting on something of its own (a probe of an open circuit) checks
   * it before sending the request: a request no one waits for would still be counted, and what
   * it carried for the decision (a debt, see core/store-debt.ts) would be counted twice.
   */
  readonly abandoned?: boolean;
}

export interface BudgetTimes {
  /** Store time a call may take beyond its expected round trip. */
  readonly budgetMs: number;
  /** How long connection setup for one call may take before the store counts as failed. */
  readonly connectBudgetMs: number;
  /** The known round trip to the store, added to `budgetMs`. */
  readonly expectedRoundTripMs: number;
}

/**
 * The time and timers a decision budget runs on. The default is the runtime's own
 * (`REAL_SCHEDULER`): a monotonic clock, never a limiter's injected epoch clock, which a test
 * may stop. The simulator (`src/simulate/`) passes a virtual one, so that a modeled store slower
 * than the budget fails open or closed exactly as it would in production.
 */
/** Its functions are called unbound (`const { now } = scheduler`). */
export interface Scheduler {
  /** Milliseconds on a monotonic clock. */
  now(): number;
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
  /** Runs `callback` once the I/O already waiting has been handled (see `afterPendingIo`). */
  afterPendingIo(callback: () => void): void;
}

/** A timer this much late or less is on time: timers are never exact, and a busy machine delays them a little. */
const LAG_TOLERANCE_MS = 5;

/**
 * Runs `callback` once the I/O that is already waiting has been handled. In Node,
 * `setImmediate` runs after the loop's poll phase, which reads every readable socket first; a
 * runtime without it gets a zero timeout, which runs after the next poll as well.
 */
export function afterPendingIo(callback: () => void): void {
  const immediate = (globalThis as { setImmediate?: (callback: () => void) => unknown })
    .setImmediate;
  if (immediate !== undefined) immediate(callback);
  else setTimeout(callback, 0);
}

/**
 * The runtime's clock and timers: what every limiter uses unless told otherwise. The runtime's
 * own functions, not wrappers around them: wrappers slow `limiter.check` on a remote store
 * (bench/redis.bench.ts; docs/benchmarks.md, "Redis store").
 */
export const REAL_SCHEDULER: Scheduler = {
  now: performance.now.bind(performance),
  setTimeout: setTimeout as Scheduler["setTimeout"],
  clearTimeout: clearTimeout as Scheduler["clearTimeout"],
  afterPendingIo,
};

/**
 * A timeout that fires no sooner than `ms` and only after the I/O waiting at that moment has
 * been read: what stores use for their own give-up timers, so a reply that sits unread behind
 * our work is never counted as a store that did not answer. `isSettled` is asked after that
 * read; the callback runs only if it still says no. Returns a cancel function.
 */
export function timeoutAfterPendingIo(
  ms: number,
  isSettled: () => boolean,
  onTimeout: () => void,
  scheduler: Scheduler = REAL_SCHEDULER,
): () => void {
  // Unbound, as the Scheduler says: workerd's own timers throw "Illegal invocation" when called
  // as methods of another object (test/redis-rest/workerd.test.ts).
  const { setTimeout: setTimer, clearTimeout: clearTimer, afterPendingIo: afterIo } = scheduler;
  let cancelled = false;
  const timer = setTimer(() => {
    afterIo(() => {
      if (!cancelled && !isSettled()) onTimeout();
    });
  }, ms);
  return () => {
    cancelled = true;
    clearTimer(timer);
  };
}

/**
 * Resolves with the store's answer, or rejects with `EL_STORE_TIMEOUT` when the store has not
 * answered within the budget as described above. `call` starts the store call and receives the
 * progress callbacks; a store that reports no connection setup has its budget start at once.
 * `scheduler` gives the clock and timers (default: the runtime's).
 */
export function withinBudget<T>(
  call: (progress: StoreCallProgress) => Promise<T>,
  times: BudgetTimes,
  storeName: string,
  scheduler: Scheduler = REAL_SCHEDULER,
): Promise<T> {
  const {
    now: clock,
    setTimeout: setTimer,
    clearTimeout: clearTimer,
    afterPendingIo: afterIo,
  } = scheduler;
  return new Promise<T>((resolve, reject) => {
    const started = clock();
    const storeBudgetMs = times.budgetMs + times.expectedRoundTripMs;
    let settled = false;
    let setups = 0;
    // When the store budget runs from: the call's start, or the end of its last setup.
    let budgetFrom = started;
    // Time given back to the store because we were late ourselves (see `check`).
    let givenBack = 0;
    const latest = started + times.connectBudgetMs + storeBudgetMs;
    let timer: unknown;
    let timerDue = 0;

    const fail = (message: string): void => {
      settled = true;
      progress.abandoned = true;
      reject(new EdgelimitError("EL_STORE_TIMEOUT", message));
    };
    const arm = (ms: number): void => {
      if (timer !== undefined) clearTimer(timer);
      timerDue = clock() + Math.max(0, ms);
      timer = setTimer(onTimer, Math.max(0, ms));
    };
    /**
     * `ourLagMs`: how long after the timer was due we got to look (late timers, and the other
     * I/O of the loop turn that reads waiting replies): time in which we could not have sent or
     * read this call's request and answer.
     */
    const check = (ourLagMs: number): void => {
      if (settled) return;
      const now = clock();
      if (setups > 0) {
        const connectDue = started + times.connectBudgetMs;
        if (now < connectDue) arm(connectDue - now);
        else {
          fail(
            `store "${storeName}" could not set up a connection within ${times.connectBudgetMs} ms`,
          );
        }
        return;
      }
      const due = budgetFrom + storeBudgetMs + givenBack;
      if (now < due) arm(due - now);
      else if (ourLagMs > LAG_TOLERANCE_MS && now < latest) {
        // We were too busy to run on time, and may have been too busy to send the request (a
        // client that writes on the next loop turn) or to read its answer: the store gets that
        // time back, bounded by `latest`.
        givenBack += ourLagMs;
        arm(Math.min(ourLagMs, latest - now));
      } else fail(`store "${storeName}" did not answer within ${storeBudgetMs} ms`);
    };
    const onTimer = (): void => {
      timer = undefined;
      // Our lag runs until we look: the timer's own lateness and the I/O we handled first.
      afterIo(() => check(clock() - timerDue));
    };
    // A data property set when the decision gives up, not a getter: an accessor in this literal,
    // made for every call, slows `limiter.check` on a remote store (bench/redis.bench.ts).
    const progress: { abandoned: boolean } & StoreCallProgress = {
      abandoned: false,
      connecting() {
        setups++;
        let done = false;
        return () => {
          if (done) return;
          done = true;
          setups--;
          if (setups > 0 || settled) return;
          budgetFrom = clock();
          arm(storeBudgetMs);
        };
      },
    };

    let pending: Promise<T>;
    try {
      pending = call(progress);
    } catch (error) {
      reject(error);
      return;
    }
    if (!settled && timer === undefined) arm(storeBudgetMs);
    pending.then(
      (value) => {
        if (settled) return;
        settled = true;
        if (timer !== undefined) clearTimer(timer);
        resolve(value);
      },
      (error: unknown) => {
        if (settled) return;
        settled = true;
        progress.abandoned = true;
        if (timer !== undefined) clearTimer(timer);
        reject(error);
      },
    );
  });
}
