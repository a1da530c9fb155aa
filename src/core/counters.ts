/**
 * Counters: `counterOf`, the one way a rule becomes a counter for the counting step
 * (count-step.ts), and the counters a request touches (one per matched rule, keyed
 * `<subject>|<namespace>|<scope>`). rls's configuration mode and `createRateLimit` key their
 * counters their own way and build them with `counterOf` too.
 */
import { GenerationalCache } from "./generational-cache.js";
import type { Identity } from "./identify.js";
import type { CompiledRule } from "./match.js";
import type { ResolvedRule } from "./model.js";
import type { CounterSpec } from "./types.js";

/**
 * The counter of `rule` for `subject` under `key` (which begins with the subject: stores hash
 * or shard by it). Shadow rules observe; the others enforce. `namespace` is the one stores and
 * reports file it under (the rule's own unless the caller groups its rules, as rls by domain).
 */
export function counterOf(
  rule: ResolvedRule,
  subject: string,
  key: string,
  cost: number = rule.cost,
  namespace: string = rule.namespace,
): CounterSpec {
  return {
    key,
    subject,
    algorithm: rule.algorithm,
    limit: rule.limit,
    window: rule.window,
    cost,
    mode: rule.shadow ? "observe" : "enforce",
    ruleId: rule.id,
    namespace,
    counting: rule.counting,
  };
}

/** Subjects per counter-cache generation (at most twice this many held; see GenerationalCache). */
const CACHED_SUBJECTS_PER_GENERATION = 16_384;

/**
 * Builds counters for one policy. A returning subject's usual counters (the rule's own limit
 * and cost) are kept, bounded, so a busy client's request builds no counter objects; a request
 * with a cost of its own or a challenge pass gets a counter of its own.
 */
export class CounterBuilder {
  readonly #ruleCount: number;
  readonly #usual = new GenerationalCache<(CounterSpec | undefined)[]>(
    CACHED_SUBJECTS_PER_GENERATION,
  );

  constructor(ruleCount: number) {
    this.#ruleCount = ruleCount;
  }

  /** The counters of `rules` for this identity, in the same order. */
  countersFor(
    rules: readonly CompiledRule[],
    identity: Identity,
    requestCost: number | undefined,
    passVerified: boolean,
  ): CounterSpec[] {
    return rules.map((compiled) => this.#counterFor(compiled, identity, requestCost, passVerified));
  }

  #counterFor(
    compiled: CompiledRule,
    identity: Identity,
    requestCost: number | undefined,
    passVerified: boolean,
  ): CounterSpec {
    const { rule } = compiled;
    const subject =
      rule.key === "ip" ? identity.ipSubject : (identity.userSubject ?? identity.ipSubject);
    const usual = this.#usualCounter(compiled, subject);
    // A pass holder is refused only beyond the challenge band, never beyond the hard limit.
    const limit =
      passVerified && rule.action === "challenge"
        ? Math.floor(rule.limit * rule.challengeBand)
        : rule.limit;
    const cost = requestCost ?? rule.cost;
    if (limit === usual.limit && cost === usual.cost) return usual;
    return { ...usual, limit, cost };
  }

  #usualCounter(compiled: CompiledRule, subject: string): CounterSpec {
    let counters = this.#usual.get(subject);
    if (counters === undefined) {
      counters = new Array(this.#ruleCount);
      this.#usual.set(subject, counters);
    }
    let counter = counters[compiled.ordinal];
    if (counter === undefined) {
      counter = counterOf(compiled.rule, subject, subject + compiled.keySuffix);
      counters[compiled.ordinal] = counter;
    }
    return counter;
  }
}
