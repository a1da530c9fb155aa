/**
 * From the counters' states to a decision: admitted when every enforcing rule admits; refused
 * otherwise, by the rule with the longest wait, as a challenge while every refusing rule is a
 * challenging rule inside its band, else as a block.
 * Also the decisions no count took part in: a block the block cache still holds, and the rule
 * fail mode when the store failed.
 */
import type { BlockCache } from "./block-cache.js";
import type { Decision } from "./decision.js";
import type { CompiledRule, Match } from "./match.js";
import type { ResolvedPolicy, ResolvedRule } from "./model.js";
import type { CounterSpec, CounterState, RuleOutcome } from "./types.js";

/** The part of a decision that the counts settle (the engine adds who and where). */
export type CountedDecision = Pick<
  Decision,
  "action" | "reason" | "rule" | "outcome" | "outcomes" | "shadowed" | "retryAfterSeconds"
> & { readonly storeError?: string | undefined };

const NO_SHADOWED: readonly string[] = Object.freeze([]);
const NO_NAMES = NO_SHADOWED;
const NO_OUTCOMES: readonly RuleOutcome[] = Object.freeze([]);

export function decideFromCounts(
  rules: readonly CompiledRule[],
  counters: readonly CounterSpec[],
  states: readonly CounterState[],
  passVerified: boolean,
  blockCache: BlockCache | undefined,
  now: number,
): CountedDecision {
  const outcomes: RuleOutcome[] = [];
  let shadowed: string[] | undefined;
  let refusing: RuleOutcome | undefined;
  let refusingRule: CompiledRule | undefined;
  let deciding: RuleOutcome | undefined;
  let decidingRule: CompiledRule | undefined;
  let challenged = false;
  let hardBlock = false;

  rules.forEach((compiled, i) => {
    const { rule } = compiled;
    const counter = counters[i] as CounterSpec;
    const state = states[i] as CounterState;
    const outcome: RuleOutcome = {
      ruleId: rule.id,
      namespace: rule.namespace,
      key: counter.key,
      limit: rule.limit,
      state,
      shadow: rule.shadow,
    };
    outcomes.push(outcome);
    if (rule.shadow) {
      if (!state.allowed) {
        shadowed ??= [];
        shadowed.push(rule.id);
      }
      return;
    }
    // An answer with no count (the Workers binding) is never disclosed, so it never decides.
    if (
      rule.disclose &&
      state.countUnknown !== true &&
      (deciding === undefined || state.remaining < deciding.state.remaining)
    ) {
      deciding = outcome;
      decidingRule = compiled;
    }
    if (state.allowed) return;
    const inBand =
      rule.action === "challenge" && !passVerified && state.count < rule.limit * rule.challengeBand;
    if (inBand) challenged = true;
    else {
      hardBlock = true;
      blockCache?.remember(counter, rule, state, now);
    }
    if (refusing === undefined || state.retryAfterMs > refusing.state.retryAfterMs) {
      refusing = outcome;
      refusingRule = compiled;
    }
  });

  if (refusing === undefined) {
    return {
      action: "allow",
      reason: "within-limit",
      rule: decidingRule?.rule,
      outcome: deciding,
      outcomes,
      shadowed: shadowed ?? NO_SHADOWED,
      retryAfterSeconds: 0,
    };
  }
  const challenge = challenged && !hardBlock;
  return {
    action: challenge ? "challenge" : "block",
    reason: challenge ? "challenge-band" : "over-limit",
    rule: refusingRule?.rule,
    outcome: refusing,
    outcomes,
    shadowed: shadowed ?? NO_SHADOWED,
    retryAfterSeconds: Math.max(1, Math.ceil(refusing.state.retryAfterMs / 1000)),
  };
}

/** A block the block cache still holds: answered without the store. */
export function cachedBlock(
  rule: ResolvedRule,
  blocked: { readonly key: string; readonly until: number },
  now: number,
): CountedDecision {
  const retryAfterMs = blocked.until - now;
  const outcome: RuleOutcome = {
    ruleId: rule.id,
    namespace: rule.namespace,
    key: blocked.key,
    limit: rule.limit,
    state: {
      allowed: false,
      count: rule.limit,
      remaining: 0,
      resetAt: blocked.until,
      retryAfterMs,
    },
    shadow: false,
  };
  return {
    action: "block",
    reason: "blocked-cached",
    rule,
    outcome,
    outcomes: [outcome],
    shadowed: NO_NAMES,
    retryAfterSeconds: Math.max(1, Math.ceil(retryAfterMs / 1000)),
  };
}

/** The store failed or missed the budget: fail closed where a rule or the path says so. */
export function failMode(
  policy: ResolvedPolicy,
  match: Match,
  storeError: string,
): CountedDecision {
  const closedRule = match.rules.find((rule) => !rule.shadow && rule.failMode === "closed");
  const open = closedRule === undefined && !match.failClosedPath;
  return {
    action: open ? "allow" : "unavailable",
    reason: open ? "store-failed-open" : "store-failed-closed",
    rule: closedRule ?? match.rules[0],
    outcome: undefined,
    outcomes: NO_OUTCOMES,
    shadowed: NO_NAMES,
    retryAfterSeconds: open ? 0 : policy.unavailableRetryAfterSeconds,
    storeError,
  };
}
