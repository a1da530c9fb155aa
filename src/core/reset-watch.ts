import { type BudgetTimes, REAL_SCHEDULER, type Scheduler, withinBudget } from "./deadline.js";
import type { ForgetsBlocks, ResetFollower, ResetsSince, StoreCallProgress } from "./types.js";

/**
 * The most a reset made by another process is left unseen by this one's block cache, in the
 * limiter's clock (documented in docs/policy.md, "Responses", and docs/redis.md).
 */
export const RESET_CHECK_MS = 1000;

/** Reads a store's log of resets since `mark` (undefined the first time). */
export type ReadResets = (
  mark: string | undefined,
  progress?: StoreCallProgress,
) => Promise<ResetsSince>;

/**
 * Keeps the block cache true to resets made elsewhere. The cache answers a blocked key without
 * the store, which is safe while nothing but more counting can happen to the key; a reset in
 * another process (`limiter.reset` after a successful login) makes the store more lenient than
 * the cache. So the cache answers only while this process's last answered read of the store's log
 * of resets was sent within the last `RESET_CHECK_MS`; past that, the cached refusal waits for
 * one read, shared by every request that needs it, and the keys reset meanwhile are forgotten.
 * A store that keeps such a log makes one for each block cache (`Store.followResets`), so that a
 * bundle whose store keeps none carries none of this code.
 *
 * The cost is one call per `RESET_CHECK_MS` per process while blocked clients keep knocking,
 * however many they are: a blocked key still costs no call of its own. The first read cannot tell
 * what came before it and forgets every block, so it goes out with the process's first store call
 * (`prime`), before there is a block to forget (not on Workers, where a read belongs to the
 * request that made it: there an isolate's first blocks cost one call more, once). A read that
 * fails (the store is down) leaves the cache answering: it is never more lenient than the store,
 * only late to hear of a reset, until a read succeeds. What no read can tell: a reset that lands
 * while this process's own call for the same key is under way, and answered after the read that
 * reported the reset, is missed.
 */
export class ResetWatch implements ResetFollower {
  readonly #cache: ForgetsBlocks;
  readonly #read: ReadResets;
  readonly #storeName: string;
  readonly #scheduler: Scheduler;
  /**
   * False where one request cannot await I/O another started (`StoreTraits.requestScopedIo`,
   * Workers): each request that needs a read then makes its own, and none is made ahead.
   */
  readonly #shared: boolean;
  #mark: string | undefined;
  /** Limiter clock when the last read was sent, and when the last answered one was. */
  #sentAt = Number.NEGATIVE_INFINITY;
  #answeredFrom = Number.NEGATIVE_INFINITY;
  #inFlight = 0;
  /** The read in flight, where reads are shared. */
  #reading: Promise<void> | undefined;
  #primed = false;

  /** `read` reads the store's log; `scheduler` runs the decision budget (the limiter's). */
  constructor(
    cache: ForgetsBlocks,
    read: ReadResets,
    options: { storeName: string; shared: boolean; scheduler?: Scheduler | undefined },
  ) {
    this.#cache = cache;
    this.#read = read;
    this.#storeName = options.storeName;
    this.#shared = options.shared;
    this.#scheduler = options.scheduler ?? REAL_SCHEDULER;
  }

  /** Reads the log's mark once, with the first store call, so that later reads can tell. */
  prime(now: number, times: BudgetTimes): void {
    if (this.#primed) return;
    this.#primed = true;
    if (this.#shared && this.#inFlight === 0 && this.#mark === undefined) {
      void this.#start(now, times);
    }
  }

  /**
   * Undefined when the cache may answer at `now`; otherwise a promise that settles once the log
   * has been read (or the read failed, or took longer than the decision budget `times`).
   */
  due(now: number, times: BudgetTimes): Promise<void> | undefined {
    if (recent(now, this.#answeredFrom)) return undefined;
    if (this.#reading !== undefined) return this.#reading;
    // The last read failed (the store is down): answer on until the next is due.
    if (this.#inFlight === 0 && recent(now, this.#sentAt)) return undefined;
    return this.#start(now, times);
  }

  #start(now: number, times: BudgetTimes): Promise<void> {
    this.#primed = true;
    this.#sentAt = now;
    this.#inFlight++;
    const mark = this.#mark;
    const read = (progress: StoreCallProgress) => this.#read(mark, progress);
    const reading = withinBudget(read, times, this.#storeName, this.#scheduler)
      .then(
        (answer) => this.#forget(answer, now),
        () => {
          // The store did not answer: the cache answers on, never more lenient than the store.
        },
      )
      .finally(() => {
        this.#inFlight--;
        if (this.#reading === reading) this.#reading = undefined;
      });
    if (this.#shared) this.#reading = reading;
    return reading;
  }

  #forget(answer: ResetsSince, sentAt: number): void {
    // Reads that cross (one per request, on Workers) never move the mark back.
    if (sentAt >= this.#answeredFrom) {
      this.#answeredFrom = sentAt;
      this.#mark = answer.mark;
    }
    if (answer.keys === "all") {
      this.#cache.clear();
      return;
    }
    for (const key of answer.keys) this.#cache.forget(key);
  }
}

/** `at` is less than RESET_CHECK_MS before `now` (a clock that stepped back reads again). */
function recent(now: number, at: number): boolean {
  return now >= at && now - at < RESET_CHECK_MS;
}
