/**
 * The counting step: the one way counters reach a store. Every entry into the core comes here
 * with its rules already resolved and its counters built (core/counters.ts): `limiter.decide`
 * (the engine, after identity and matching), the rate limit service's configuration mode
 * (Envoy's descriptors mapped to rules) and `createRateLimit` (a key and a limit). In order:
 *
 * 0. the operators' overrides this process holds (override-watch.ts; read in memory, never
 *    from the store on this path): another limit, `block` or `allow` for a subject;
 * 1. the block cache, which answers a hard block it still holds without the store;
 * 2. one store call for all the counters, within the decision budget (deadline.ts), carrying
 *    what this process admitted on its own while the store was failed (store-debt.ts);
 * 3. when the store fails (an error, a missed budget, an open breaker, fewer states than
 *    counters), the rules' fail modes and local counting (local-fallback.ts);
 * 4. the counts as a decision (outcome.ts).
 *
 * So a fix to counting (late requests, the fail modes, cost checks) is made here once. One step
 * per store in a process: the block cache and local counting are the store's, whoever calls.
 */
import { BlockCache } from "./block-cache.js";
import { checkCost } from "./cost.js";
import { type BudgetTimes, REAL_SCHEDULER, type Scheduler, withinBudget } from "./deadline.js";
import { EdgelimitError } from "./errors.js";
import { type LocalCountingStatus, LocalFallback, stillAnswering } from "./local-fallback.js";
import type { ResolvedRule } from "./model.js";
import { type CallTerms, type CountedDecision, cachedBlock, decideFromCounts } from "./outcome.js";
import type { OverriddenCall } from "./override-table.js";
import type { OverrideWatch } from "./override-watch.js";
import type {
  CounterSpec,
  CounterState,
  RequestDescription,
  ResetFollower,
  Store,
  StoreTraits,
} from "./types.js";

export interface CountingStepOptions {
  readonly store: Store;
  /**
   * The monotonic clock and timers the decision budget runs on (default: the runtime's); the
   * simulator injects virtual ones.
   */
  readonly scheduler?: Scheduler | undefined;
  /**
   * Called with the cause each time the store fails a call (an error, a missed budget, an open
   * circuit breaker), before the rules' fail modes apply, with the request when the caller has
   * one. Must not throw.
   */
  readonly onStoreError?:
    | ((error: unknown, request: RequestDescription | undefined) => void)
    | undefined;
  /**
   * Remember hard blocks locally and answer them without a round trip until they expire
   * (default: on for remote stores, off for a store in this process). `maxKeys` bounds it.
   */
  readonly blockCache?: false | { readonly maxKeys?: number } | undefined;
  /** Bounds the counters a `failMode: local` rule holds while the store is failed. */
  readonly localFallback?: { readonly maxKeys?: number } | undefined;
  /** The overrides this process holds for the store (the limiter makes and starts it). */
  readonly overrides?: OverrideWatch | undefined;
}

/** One call of the step: counters and the rules they count for, already resolved. */
export interface CountingCall {
  /** The budget and the fail-closed answer: the policy's, or the entry's own. */
  readonly terms: CallTerms;
  /** `rules[i]` is the rule `counters[i]` counts for; the decision's `rules` is this array. */
  readonly rules: readonly ResolvedRule[];
  /** Each with a cost from 0 (checks without counting) to `MAX_COST`. */
  readonly counters: readonly CounterSpec[];
  /** Whether the caller fails closed whatever the rules say (a `failClosed` path). */
  readonly failClosed: boolean;
  /** Whether the client holds a valid challenge pass (its counters already say so). */
  readonly passVerified: boolean;
  /** The time the counters are counted at. */
  readonly now: number;
  /** The request, for the store-failure observer. */
  readonly request: RequestDescription | undefined;
}

export class CountingStep {
  readonly store: Store;
  /** The store's answer in this process, when it lives here (`StoreTraits.applySync`). */
  readonly #applySync: StoreTraits["applySync"];
  readonly #roundTripMs: StoreTraits["roundTripMs"];
  readonly #scheduler: Scheduler;
  readonly #blockCache: BlockCache | undefined;
  /** `forgetBlocks` calls so far: a decision counted before one remembers no block. */
  #forgotten = 0;
  /** Where the store keeps a log of resets: hears of other processes' (reset-watch.ts). */
  readonly #resetWatch: ResetFollower | undefined;
  readonly #local: LocalFallback;
  readonly #onStoreError: CountingStepOptions["onStoreError"];
  /** The operators' overrides held in this process, when the store keeps any. */
  readonly overrides: OverrideWatch | undefined;

  constructor(options: CountingStepOptions) {
    const store = options.store;
    this.store = store;
    this.#applySync = store.traits?.applySync;
    this.#roundTripMs = store.traits?.roundTripMs;
    this.#scheduler = options.scheduler ?? REAL_SCHEDULER;
    this.#onStoreError = options.onStoreError;
    const cache = options.blockCache ?? (this.#applySync !== undefined ? false : {});
    this.#blockCache = cache === false ? undefined : new BlockCache(cache.maxKeys);
    if (this.#blockCache !== undefined) {
      this.#resetWatch = store.followResets?.(this.#blockCache, this.#scheduler);
    }
    this.#local = new LocalFallback(options.localFallback);
    this.overrides = options.overrides;
  }

  /** What `failMode: local` rules counted in this process while the store was failed. */
  get localCounting(): LocalCountingStatus {
    return this.#local.status;
  }

  /** Round trips the block cache saved since start. */
  get blockCacheHits(): number {
    return this.#blockCache?.hits ?? 0;
  }

  /**
   * Forgets every remembered block: the policy changed, and a block remembered under a rule's
   * old window or limit may be longer than the new rule's.
   */
  forgetBlocks(): void {
    this.#blockCache?.clear();
    this.#forgotten++;
  }

  /** Forgets the blocks of counters that were reset. */
  forgetBlocksOf(counters: readonly CounterSpec[]): void {
    for (const counter of counters) this.#blockCache?.forget(counter.key);
  }

  /**
   * The decision for one call. Never rejects for a store failure (the rules' fail modes apply)
   * and never waits for the store beyond the budget; synchronous when the store is in this
   * process or the block cache answers. Throws `EL_BAD_COST` for a counter whose cost is not a
   * whole number from 0 to `MAX_COST`.
   */
  count(call: CountingCall): CountedDecision | Promise<CountedDecision> {
    for (const counter of call.counters) checkCost(counter.cost, "a counter's cost", 0);
    const watch = this.overrides;
    // Where overrides refresh on requests (Lambda@Edge, Workers), a new instance's first
    // requests wait for its first read, at most its `firstWaitMs` (override-watch.ts).
    const first = watch?.firstRead();
    if (first !== undefined) return first.then(() => this.count(call));
    const table = watch?.tableAt(call.now);
    // No overrides held (the usual case): straight on, nothing allocated (bench/core.bench.ts,
    // the full policy check, runs this path).
    if (table === undefined || table.size === 0) return this.#count(call);
    const overridden = table.apply(call.rules, call.counters, call.passVerified, call.now);
    if ("action" in overridden) return overridden;
    if (overridden.rules === call.rules) return this.#count(call);
    return this.#count({ ...call, ...overridden });
  }

  /**
   * The rules and counters with the overrides held applied (override-table.ts), or the
   * decision a `block` override (or `allow` on every rule) makes. The same arrays when none
   * applies. `limiter.peek` reads through it too, so that it reports the overridden limit.
   */
  overridden(
    rules: readonly ResolvedRule[],
    counters: readonly CounterSpec[],
    passVerified: boolean,
    now: number,
  ): OverriddenCall | CountedDecision {
    const table = this.overrides?.tableAt(now);
    if (table === undefined || table.size === 0) return { rules, counters };
    return table.apply(rules, counters, passVerified, now);
  }

  /** Stops reading overrides in the background. */
  close(): void {
    this.overrides?.close();
  }

  /**
   * `forgotten`: `forgetBlocks` calls when the call began. A call still counting when blocks
   * are forgotten (new overrides, a reload) remembers no block: it was counted under the limits
   * of before, and its block would stand for the new ones until the window ends.
   */
  #count(
    call: CountingCall,
    forgotten = this.#forgotten,
  ): CountedDecision | Promise<CountedDecision> {
    const { rules, counters, now, passVerified } = call;
    const cache = this.#blockCache;
    const blocked = cache?.blockedUntil(counters, now);
    if (cache !== undefined && blocked !== undefined) {
      // A reset elsewhere may have ended the block: read the store's log first when it is due.
      const checking = this.#resetWatch?.due(now, this.#budgetOf(call));
      if (checking !== undefined) return checking.then(() => this.#count(call, forgotten));
      cache.answered();
      const at = counters.findIndex((counter) => counter.key === blocked.key);
      return cachedBlock(rules[at] as ResolvedRule, blocked, now);
    }
    const applySync = this.#applySync;
    if (applySync !== undefined) {
      // The in-process store answers at once: no promise, no timer.
      let states: CounterState[];
      try {
        states = applySync(counters, now);
      } catch (error) {
        return this.#failed(call, error);
      }
      if (states.length < counters.length) return this.#failed(call, this.#tooFew(states));
      return decideFromCounts(rules, counters, states, passVerified, cache, now);
    }
    const store = this.store;
    const budget = this.#budgetOf(call);
    this.#resetWatch?.prime(now, budget);
    // What this process admitted on its own while the store was failed rides along (store-debt.ts).
    const paying = this.#local.pay(counters, now);
    return withinBudget(
      (progress) => store.apply(paying?.counters ?? counters, now, progress),
      budget,
      store.name,
      this.#scheduler,
    ).then(
      (states) => {
        const complete = states.length >= counters.length;
        if (paying !== undefined) this.#local.settle(paying, complete ? states : undefined);
        if (!complete) return this.#failed(call, this.#tooFew(states));
        // Counted before blocks were forgotten, its block may not hold for the limits of now.
        return decideFromCounts(
          rules,
          counters,
          states,
          passVerified,
          this.#forgotten === forgotten ? cache : undefined,
          now,
        );
      },
      (error: unknown) => {
        if (paying !== undefined) this.#local.settle(paying, undefined);
        return this.#failed(call, error);
      },
    );
  }

  /** The budget of a store call for these counters (see deadline.ts). */
  #budgetOf(call: Pick<CountingCall, "terms" | "counters">): BudgetTimes {
    const { budgetMs, connectBudgetMs } = call.terms;
    const expectedRoundTripMs = this.#roundTripMs?.(call.counters) ?? 0;
    return { budgetMs, connectBudgetMs, expectedRoundTripMs };
  }

  /** A store that answers fewer counters than it was asked for has failed the call. */
  #tooFew(states: readonly CounterState[]): EdgelimitError {
    return new EdgelimitError(
      "EL_STORE_FAILED",
      `the ${this.store.name} store answered ${states.length} counters' states for a call of more`,
    );
  }

  /** Reports a store failure to the observer, and decides by the rules' fail modes. */
  #failed(call: CountingCall, error: unknown): CountedDecision {
    try {
      this.#onStoreError?.(error, call.request);
    } catch {
      // Observers must never change a decision.
    }
    const cause = error instanceof Error ? error.message : String(error);
    const { terms, rules, failClosed, counters, passVerified, now } = call;
    const slow = stillAnswering(error, this.store);
    return this.#local.decide(terms, rules, failClosed, counters, passVerified, now, cause, slow);
  }

  /**
   * Reads counters without counting them (`limiter.peek`, core/peek.ts): one store call with
   * every cost 0, within the budget; the block cache, the observers and what this process owes
   * the store are left alone. When the store fails, `failMode: local` rules read this process's
   * local counts (counting nothing) and the others are unknown (undefined).
   */
  async read(call: Omit<CountingCall, "failClosed" | "passVerified" | "request">): Promise<Read> {
    const { counters, now } = call;
    const reading = counters.map((counter) => ({ ...counter, cost: 0 }));
    try {
      const applySync = this.#applySync;
      const states =
        applySync !== undefined
          ? applySync(reading, now)
          : await withinBudget(
              (progress) => this.store.apply(reading, now, progress),
              this.#budgetOf(call),
              this.store.name,
              this.#scheduler,
            );
      if (states.length < counters.length) throw this.#tooFew(states);
      return { states };
    } catch (error) {
      const storeError = error instanceof Error ? error.message : String(error);
      const local = call.rules.flatMap((rule, i) => (rule.failMode === "local" ? [i] : []));
      const read = this.#local.peek(
        local.map((i) => reading[i] as CounterSpec),
        now,
      );
      const states: (CounterState | undefined)[] = counters.map(() => undefined);
      local.forEach((at, i) => {
        states[at] = read[i];
      });
      return { states, storeError };
    }
  }
}

/** What `CountingStep.read` found: a state per counter (undefined: unknown), and why not all. */
export interface Read {
  readonly states: readonly (CounterState | undefined)[];
  /** Why the store failed, when it did. */
  readonly storeError?: string;
}
