/**
 * What a decision does when the store has failed (an error, a missed budget, an open circuit
 * breaker), by each matched rule's `failMode`:
 *
 * - `closed` (or a `failClosed` path): 503, as before;
 * - `local` (the default): the rule is counted in this process, against its own limit, with the
 *   algorithms the memory store runs (local-counter.ts), so that no store failure makes a limit
 *   disappear. The decision's reason is `store-failed-local`; it admits, challenges or blocks as
 *   the local count says;
 * - `open`: the rule is not counted; when no rule counts locally the request is admitted
 *   (`store-failed-open`).
 *
 * The local limit is each process's own: N processes admit up to N times the limit while the
 * store is down (docs/policy.md says what that is for each edition). What this process admitted
 * is owed to the store and paid with the next call that counts the same counter (store-debt.ts),
 * so that a store that comes back does not admit the window's limit again.
 *
 * A `counting: hybrid` rule is counted locally only when the store has failed, not when it is
 * merely slow. A request that missed its budget while the store still answers (a far lease
 * region, a request queued behind reservations already in flight) was sent all the same: its
 * reservation is counted in the store after the decision has moved on, and the units it finds
 * are held for the next requests, or none are left because the window's limit is reserved
 * already. Admitting it on a fresh local count, which knows nothing of the window's
 * reservations, would admit beyond the limit, and its admission could never be paid (hybrid
 * counters carry no debt: their reservations count ahead of admission). So while the store's
 * status is `ok`, such a request is refused by the hybrid rule (`store-failed-local`, count
 * unknown, Retry-After 1 s); once the store's own calls fail (an error, its call timeout, an
 * open circuit breaker) the rule is counted locally as any other. A store without a status
 * cannot tell: its hybrid rules are counted locally.
 */
import { EdgelimitError } from "./errors.js";
import { LocalCounter } from "./local-counter.js";
import type { ResolvedRule } from "./model.js";
import { type CallTerms, type CountedDecision, decideFromCounts, failMode } from "./outcome.js";
import { type PaidCall, StoreDebt } from "./store-debt.js";
import type { CounterSpec, CounterState, Store } from "./types.js";
import { windowAt } from "./windows.js";

export interface LocalFallbackOptions {
  /** Counters held for local counting, and debts owed to the store (default 100,000 each). */
  readonly maxKeys?: number;
}

/** What health pages show of local counting. */
export interface LocalCountingStatus {
  /** Decisions counted locally since start. */
  readonly decisions: number;
  /** Epoch ms of the last one. */
  readonly lastAt: number | undefined;
  /** Counters held for local counting. */
  readonly keys: number;
  /** Counters with admissions owed to the store. */
  readonly owedKeys: number;
  /** Debts dropped for room (admissions the store will never see). */
  readonly droppedDebts: number;
}

const DEFAULT_MAX_KEYS = 100_000;

export class LocalFallback {
  readonly #counter: LocalCounter;
  readonly #debt: StoreDebt;
  #decisions = 0;
  #lastAt: number | undefined;

  constructor(options: LocalFallbackOptions = {}) {
    const maxKeys = Math.max(2, options.maxKeys ?? DEFAULT_MAX_KEYS);
    this.#counter = new LocalCounter(maxKeys / 2);
    this.#debt = new StoreDebt(maxKeys);
  }

  get status(): LocalCountingStatus {
    return {
      decisions: this.#decisions,
      lastAt: this.#lastAt,
      keys: this.#counter.size,
      owedKeys: this.#debt.size,
      droppedDebts: this.#debt.dropped,
    };
  }

  /** The counters to send to the store, with what this process owes it (see store-debt.ts). */
  pay(counters: readonly CounterSpec[], now: number): PaidCall | undefined {
    return this.#debt.take(counters, now);
  }

  /** After the store call `pay` made: its states, or undefined when it failed. */
  settle(call: PaidCall, states: readonly CounterState[] | undefined): void {
    this.#debt.settle(call, states);
  }

  /** What `decide` would count these counters against locally, counting nothing (peek.ts). */
  peek(counters: readonly CounterSpec[], now: number): CounterState[] {
    return this.#counter.peek(counters, now);
  }

  /**
   * The decision for a call whose store call failed (see the top of this file): `rules[i]` is
   * the rule `counters[i]` counts for; `failClosed`, whether the caller fails closed whatever
   * the rules say (a `failClosed` path); `storeAnswering`, whether the call missed its budget
   * while the store still answers (`stillAnswering`).
   */
  decide(
    terms: CallTerms,
    rules: readonly ResolvedRule[],
    failClosed: boolean,
    counters: readonly CounterSpec[],
    passVerified: boolean,
    now: number,
    storeError: string,
    storeAnswering = false,
  ): CountedDecision {
    const failed = failMode(terms, rules, failClosed, storeError);
    const local = rules.flatMap((rule, i) => (rule.failMode === "local" ? [i] : []));
    if (failed.action === "unavailable" || local.length === 0) return failed;
    // A slow store's hybrid rules refuse (see the top of this file); the rest is not counted.
    const reserved = storeAnswering ? local.filter((i) => isHybridEnforced(counters[i])) : [];
    const counted = reserved.length > 0 ? reserved : local;
    const localRules = counted.map((i) => rules[i] as ResolvedRule);
    const localCounters = counted.map((i) => counters[i] as CounterSpec);
    let states: CounterState[];
    if (reserved.length > 0) {
      states = localCounters.map((counter) => refusedUncounted(counter, now));
    } else {
      const applied = this.#counter.apply(localCounters, now);
      states = applied.states;
      if (applied.admitted) for (const counter of localCounters) this.#debt.add(counter, now);
    }
    this.#decisions++;
    this.#lastAt = now;
    // A local refusal is not remembered in the block cache: while the cache answered for the
    // key, no call would reach the store to pay this process's debt on it.
    const decided = decideFromCounts(
      localRules,
      localCounters,
      states,
      passVerified,
      undefined,
      now,
    );
    return { ...decided, reason: "store-failed-local", storeError };
  }
}

/**
 * The call missed its decision budget (`EL_STORE_TIMEOUT` from deadline.ts) while the store says
 * its own calls are answered (`status` `ok`): slow, not failed. A call the store failed itself
 * (its call timeout, an error) has made its status `failing` by the time the decision sees it.
 */
export function stillAnswering(error: unknown, store: Store): boolean {
  if (!(error instanceof EdgelimitError) || error.code !== "EL_STORE_TIMEOUT") return false;
  return store.traits?.status?.().state === "ok";
}

function isHybridEnforced(counter: CounterSpec | undefined): boolean {
  return counter?.counting === "hybrid" && counter.mode === "enforce";
}

/** A hybrid rule's answer while its store is slow: refused, its count not known here. */
function refusedUncounted(counter: CounterSpec, now: number): CounterState {
  return {
    allowed: false,
    count: counter.limit,
    remaining: 0,
    resetAt: windowAt(counter.window, now).end,
    retryAfterMs: 1000,
    countUnknown: true,
  };
}
