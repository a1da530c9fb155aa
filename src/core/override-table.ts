/**
 * The overrides one instance holds (a snapshot of the store's, override-watch.ts), indexed for
 * the counting step: an exact subject is one map lookup; address ranges are walked only for an
 * `ip:` subject and only when some are held. With no override held, a call is not touched.
 *
 * Which override applies to a counter, when several could: an exact subject before a range
 * (the longest range first), then one rule before a plan before all rules. An expired override
 * is skipped at the time of the call, so expiry needs no refresh to take effect.
 *
 * An override changes the call, not the counter's identity: a `limit` swaps the rule's and the
 * counter's limit (key and window unchanged, so the count carries over both ways); `allow`
 * takes the counter out of the call (nothing counted, nothing refused for that rule); `block`
 * refuses the request before the store is asked.
 */
import type { Decision } from "./decision.js";
import { type Address, parseCidr } from "./ip.js";
import type { ResolvedRule } from "./model.js";
import type { CountedDecision } from "./outcome.js";
import { inScope, type Override } from "./overrides.js";
import type { CounterSpec, RuleOutcome } from "./types.js";

/** What the step counts: `rules[i]` is the rule `counters[i]` counts for. */
export interface OverriddenCall {
  readonly rules: readonly ResolvedRule[];
  readonly counters: readonly CounterSpec[];
}

interface Range {
  readonly address: Address;
  readonly bits: number;
  readonly overrides: Override[];
}

const NO_NAMES: readonly string[] = Object.freeze([]);
const NO_OUTCOMES: readonly RuleOutcome[] = Object.freeze([]);

export class OverrideTable {
  /** Every override held, as read or set (for `list`). */
  readonly all: readonly Override[];
  readonly #exact = new Map<string, Override[]>();
  readonly #ranges: Range[] = [];
  /** A rule with its limit overridden, one object per rule and limit (headers key on it). */
  readonly #limited = new Map<ResolvedRule, Map<number, ResolvedRule>>();

  constructor(overrides: readonly Override[]) {
    this.all = overrides;
    for (const override of overrides) {
      const slash = override.subject.startsWith("ip:") ? override.subject.indexOf("/") : -1;
      if (slash === -1) {
        const list = this.#exact.get(override.subject) ?? [];
        list.push(override);
        this.#exact.set(override.subject, list);
        continue;
      }
      const [address, bits] = parseCidr(override.subject.slice(3));
      const range = this.#ranges.find(
        (r) => r.bits === bits && r.address.toString() === address.toString(),
      );
      if (range === undefined) this.#ranges.push({ address, bits, overrides: [override] });
      else range.overrides.push(override);
    }
    this.#ranges.sort((a, b) => b.bits - a.bits);
  }

  get size(): number {
    return this.all.length;
  }

  /** The override that applies to `rule` for `subject` at `now`, if any. */
  find(subject: string, rule: ResolvedRule, now: number): Override | undefined {
    const exact = this.#exact.get(subject);
    const found = exact === undefined ? undefined : mostSpecific(exact, rule, now);
    if (found !== undefined || this.#ranges.length === 0 || !subject.startsWith("ip:"))
      return found;
    const address = addressOf(subject);
    if (address === undefined) return undefined;
    for (const range of this.#ranges) {
      if (range.bits > address.bits || !address.address.match(range.address, range.bits)) continue;
      const inRange = mostSpecific(range.overrides, rule, now);
      if (inRange !== undefined) return inRange;
    }
    return undefined;
  }

  /**
   * The call with the overrides applied, or the decision a `block` override makes. The same
   * arrays when nothing applies. `passVerified`: a pass holder's challenge rule counts to its
   * band of the overridden limit, as of the rule's own (core/counters.ts).
   */
  apply(
    rules: readonly ResolvedRule[],
    counters: readonly CounterSpec[],
    passVerified: boolean,
    now: number,
  ): OverriddenCall | CountedDecision {
    if (this.all.length === 0) return { rules, counters };
    let keptRules: ResolvedRule[] | undefined;
    let keptCounters: CounterSpec[] | undefined;
    for (let i = 0; i < rules.length; i++) {
      const rule = rules[i] as ResolvedRule;
      const counter = counters[i] as CounterSpec;
      const override = this.find(counter.subject, rule, now);
      if (override === undefined) {
        keptRules?.push(rule);
        keptCounters?.push(counter);
        continue;
      }
      if (override.effect === "block" && !rule.shadow) return blocked(rule, rules);
      keptRules ??= rules.slice(0, i);
      keptCounters ??= counters.slice(0, i);
      if (override.effect !== "limit") continue;
      const limit = override.limit as number;
      const limited = this.#withLimit(rule, limit);
      const counted =
        passVerified && rule.action === "challenge"
          ? Math.floor(limit * rule.challengeBand)
          : limit;
      keptRules.push(limited);
      keptCounters.push({ ...counter, limit: counted });
    }
    if (keptRules === undefined || keptCounters === undefined) return { rules, counters };
    if (keptRules.length === 0) return allowed();
    return { rules: keptRules, counters: keptCounters };
  }

  #withLimit(rule: ResolvedRule, limit: number): ResolvedRule {
    let byLimit = this.#limited.get(rule);
    if (byLimit === undefined) {
      byLimit = new Map();
      this.#limited.set(rule, byLimit);
    }
    let limited = byLimit.get(limit);
    if (limited === undefined) {
      limited = { ...rule, limit };
      byLimit.set(limit, limited);
    }
    return limited;
  }
}

/** Whether `apply` answered a decision rather than a call. */
export function isDecision(result: OverriddenCall | CountedDecision): result is CountedDecision {
  return "action" in result;
}

export const NO_OVERRIDES = new OverrideTable([]);

/** A rule's own scope before its plan's before all rules; expired ones skipped. */
function mostSpecific(
  overrides: readonly Override[],
  rule: ResolvedRule,
  now: number,
): Override | undefined {
  let best: Override | undefined;
  let bestRank = 0;
  for (const override of overrides) {
    if (override.until !== undefined && override.until <= now) continue;
    if (!inScope(override.scope, rule)) continue;
    const rank = override.scope === "all" ? 1 : override.scope.startsWith("plan:") ? 2 : 3;
    if (rank > bestRank) {
      best = override;
      bestRank = rank;
    }
  }
  return best;
}

/** An `ip:` counter subject's address and prefix (`ip:203.0.113.7`, `ip:2001%3Adb8%3A%3A/64`). */
function addressOf(subject: string): { address: Address; bits: number } | undefined {
  try {
    const [address, bits] = parseCidr(subject.slice(3).replace(/%3A/g, ":"));
    return { address, bits };
  } catch {
    return undefined;
  }
}

/** Refused by an operator: no counter asked, nothing counted (a 403, as a denylisted address). */
function blocked(rule: ResolvedRule, rules: readonly ResolvedRule[]): CountedDecision {
  return decided("block", "override-block", rule, rules);
}

/** Every rule the request matched is allowed by an override: nothing to count. */
function allowed(): CountedDecision {
  return decided("allow", "override-allow", undefined, []);
}

function decided(
  action: Decision["action"],
  reason: Decision["reason"],
  rule: ResolvedRule | undefined,
  rules: readonly ResolvedRule[],
): CountedDecision {
  return {
    action,
    reason,
    rule,
    outcome: undefined,
    outcomes: NO_OUTCOMES,
    rules,
    shadowed: NO_NAMES,
    retryAfterSeconds: 0,
  };
}
