/**
 * The counters of one call against an envoyproxy/ratelimit configuration (config-decide.ts):
 * one per configured rule of each descriptor, keyed by the descriptor's entries, and the state
 * each descriptor is answered from.
 *
 * Descriptors of one call that count the same counter (the same entries, or values that a
 * `share_threshold` counts as one) are one counter in the store call, with their hits added: a
 * store takes each key once per call (the contract in core/types.ts), and envoyproxy/ratelimit
 * counts each descriptor as an increment of its own, so two identical descriptors of 6 hits add
 * 12. Each of them is answered as the counter stood after its own hits: in a call that is
 * admitted, an earlier one reports what remained before the later ones' hits (ten identical
 * descriptors of one hit against a limit of 10 report 9 down to 0, as there); when their hits
 * together go over, every one of them is OVER_LIMIT (there, those before the limit was reached
 * are OK; the call is refused either way).
 */
import { MAX_COST } from "../core/cost.js";
import { counterOf } from "../core/counters.js";
import { EdgelimitError } from "../core/errors.js";
import { escapeKeyPart } from "../core/keys.js";
import type { ResolvedRule } from "../core/model.js";
import { binds } from "../core/outcome.js";
import type { CounterSpec, CounterState } from "../core/types.js";
import type { ConfiguredLimit } from "./config.js";
import type { DescriptorEntry } from "./messages.js";

/** Where a descriptor's rule is counted: a counter of the call, and the hits on it so far. */
export interface CounterSlot {
  /** The counter's place in `CallCounters.counters`. */
  readonly index: number;
  /** Hits on that counter from this descriptor and the ones before it in the call. */
  readonly through: number;
}

/** Builds a call's counter list, one counter per key. */
export class CallCounters {
  /** The rule of each counter (the first descriptor's, where several share it). */
  readonly rules: ResolvedRule[] = [];
  readonly counters: CounterSpec[] = [];
  readonly #indexOf = new Map<string, number>();

  get size(): number {
    return this.counters.length;
  }

  /** A descriptor's counters, one slot for each of its limit's rules, in their order. */
  add(
    limit: ConfiguredLimit,
    domain: string,
    entries: readonly DescriptorEntry[],
    values: readonly string[],
    cost: number,
  ): { readonly subject: string; readonly slots: readonly CounterSlot[] } {
    const subject = subjectOf(domain, entries, values);
    // Two rules of one limit with the same algorithm and window are one counter, counted once.
    const own = new Map<number, CounterSlot>();
    const slots = limit.rules.map((rule): CounterSlot => {
      const counter = counterFor(rule, domain, entries, values, subject, cost);
      const index = this.#indexOf.get(counter.key);
      if (index === undefined) {
        const slot = { index: this.counters.length, through: cost };
        this.#indexOf.set(counter.key, slot.index);
        this.rules.push(rule);
        this.counters.push(counter);
        own.set(slot.index, slot);
        return slot;
      }
      const existing = this.counters[index] as CounterSpec;
      const repeated = own.get(index);
      if (repeated !== undefined) {
        this.counters[index] = sharedCounter(existing, { ...counter, cost: 0 });
        return repeated;
      }
      const merged = sharedCounter(existing, counter);
      this.counters[index] = merged;
      const slot = { index, through: merged.cost };
      own.set(index, slot);
      return slot;
    });
    return { subject, slots };
  }
}

/**
 * One counter for two descriptors: their hits added, held to the stricter limit (an override
 * and the configured limit of the same entries and window), enforcing if either does.
 */
function sharedCounter(first: CounterSpec, next: CounterSpec): CounterSpec {
  const cost = first.cost + next.cost;
  if (cost > MAX_COST) {
    throw new EdgelimitError(
      "EL_RLS_REQUEST",
      `rate limit call refused: descriptors of one call that count the same counter add up to ${cost} hits; at most ${MAX_COST} are counted at once`,
    );
  }
  return {
    ...first,
    cost,
    limit: Math.min(first.limit, next.limit),
    mode: first.mode === "enforce" || next.mode === "enforce" ? "enforce" : "observe",
  };
}

/**
 * The state that answers a descriptor: of its counters, the one that binds as a decision's rule
 * does (core/outcome.ts's `binds`: the refusing one that waits longest, else the fullest), its
 * shadow rules included; with `rule`, the place of that counter's rule in the descriptor's limit.
 * Undefined when none of them has a state (the store failed open, or a cached block answered
 * for another descriptor). `admitted`: the call was counted on the counters that allowed it.
 */
export function descriptorState(
  counters: readonly CounterSpec[],
  states: ReadonlyMap<string, CounterState>,
  slots: readonly CounterSlot[],
  admitted: boolean,
): { readonly state: CounterState; readonly rule: number } | undefined {
  let best: { state: CounterState; rule: number } | undefined;
  slots.forEach((slot, rule) => {
    const counter = counters[slot.index] as CounterSpec;
    const found = states.get(counter.key);
    if (found === undefined) return;
    const state = asOfOwnHits(found, counter, counter.cost - slot.through, admitted);
    if (best === undefined || binds(state, best.state)) best = { state, rule };
  });
  return best;
}

/** The counter as it stood before the `later` hits of the descriptors after this one. */
function asOfOwnHits(
  state: CounterState,
  counter: CounterSpec,
  later: number,
  admitted: boolean,
): CounterState {
  const counted = admitted || counter.mode === "observe";
  if (later === 0 || !state.allowed || !counted || state.countUnknown === true) return state;
  return {
    ...state,
    count: state.count - later,
    remaining: Math.min(counter.limit, state.remaining + later),
  };
}

/**
 * The counter's subject, which Redis Cluster uses as its hash tag: the domain and the
 * descriptor's first entry. Descriptors of one request that begin with the same entry (the
 * client's address, say) are one script call on one node; docs/proxies.md explains the choice.
 */
function subjectOf(
  domain: string,
  entries: readonly DescriptorEntry[],
  values: readonly string[],
): string {
  const first = entries[0] as DescriptorEntry;
  return `rls:${escapeKeyPart(domain)}:${escapeKeyPart(first.key)}:${escapeKeyPart(values[0] as string)}`;
}

const ALGORITHM_TAGS = { "fixed-window": "f", "sliding-window": "s", "token-bucket": "t" } as const;

function counterFor(
  rule: ResolvedRule,
  domain: string,
  entries: readonly DescriptorEntry[],
  values: readonly string[],
  subject: string,
  cost: number,
): CounterSpec {
  // `<subject>|<domain>|<key>:<value>|...|<algorithm><window>`: every part escaped, so `|` and
  // `:` appear only as separators and two counters never share a key.
  let key = `${subject}|${escapeKeyPart(domain)}`;
  entries.forEach((entry, index) => {
    key += `|${escapeKeyPart(entry.key)}:${escapeKeyPart(values[index] as string)}`;
  });
  const window = rule.window;
  key += `|${ALGORITHM_TAGS[rule.algorithm]}${"ms" in window ? `${window.ms}ms` : `${window.months}mo`}`;
  return counterOf(rule, subject, key, cost, domain);
}
