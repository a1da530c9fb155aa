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
 */
import { LocalCounter } from "./local-counter.js";
import type { ResolvedRule } from "./model.js";
import { type CallTerms, type CountedDecision, decideFromCounts, failMode } from "./outcome.js";
import { type PaidCall, StoreDebt } from "./store-debt.js";
import type { CounterSpec, CounterState } from "./types.js";

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

  /**
   * The decision for a call whose store call failed (see the top of this file): `rules[i]` is
   * the rule `counters[i]` counts for; `failClosed`, whether the caller fails closed whatever
   * the rules say (a `failClosed` path).
   */
  decide(
    terms: CallTerms,
    rules: readonly ResolvedRule[],
    failClosed: boolean,
    counters: readonly CounterSpec[],
    passVerified: boolean,
    now: number,
    storeError: string,
  ): CountedDecision {
    const failed = failMode(terms, rules, failClosed, storeError);
    const local = rules.flatMap((rule, i) => (rule.failMode === "local" ? [i] : []));
    if (failed.action === "unavailable" || local.length === 0) return failed;
    const localRules = local.map((i) => rules[i] as ResolvedRule);
    const localCounters = local.map((i) => counters[i] as CounterSpec);
    const { states, admitted } = this.#counter.apply(localCounters, now);
    if (admitted) for (const counter of localCounters) this.#debt.add(counter, now);
    this.#decisions++;
    this.#lastAt = now;
    // A local refusal is not remembered in the block cache: while the cache answered for the
    // key, no call would reach the store to pay this process's debt on it.
    const counted = decideFromCounts(
      localRules,
      localCounters,
      states,
      passVerified,
      undefined,
      now,
    );
    return { ...counted, reason: "store-failed-local", storeError };
  }
}
