/**
 * From the counters' states to a decision: admitted when every enforcing rule admits; refused
 * otherwise, by the rule with the longest wait, as a challenge while every refusing rule is a
 * challenging rule inside its band, else as a block.
 * Also the decisions no count took part in: a block the block cache still holds, and the rule
 * fail mode when the store failed.
 */
import type { BlockCache } from "./block-cache.js";
import type { Decision } from "./decision.js";
import type { ResolvedPolicy, ResolvedRule } from "./model.js";
import type { CounterSpec, CounterState, RuleOutcome } from "./types.js";

/**
 * The part of a decision that the counts settle: what the counting step (count-step.ts) answers
 * every entry with. The engine adds who and where to make a `Decision`; rls and
 * `createRateLimit` read it as it is.
 */
export type CountedDecision = Pick<
  Decision,
  | "action"
  | "reason"
  | "rule"
  | "outcome"
  | "outcomes"
  | "rules"
  | "shadowed"
  | "retryAfterSeconds"
  | "storeError"
>;

/** What a store call may take and what a failed one answers: a policy's, or an entry's own. */
export type CallTerms = Pick<
  ResolvedPolicy,
  "budgetMs" | "connectBudgetMs" | "unavailableRetryAfterSeconds"
>;

const NO_SHADOWED: readonly string[] = Object.freeze([]);
const NO_NAMES = NO_SHADOWED;
const NO_OUTCOMES: readonly RuleOutcome[] = Object.freeze([]);

/**
 * `rules[i]` is the rule `counters[i]` counts for and `states[i]` its state; the decision's
 * `rules` is `rules` itself (http/respond.ts keys what it builds once on that array).
 */
export function decideFromCounts(
  rules: readonly ResolvedRule[],
  counters: readonly CounterSpec[],
  states: readonly CounterState[],
  passVerified: boolean,
  blockCache: BlockCache | undefined,
  now: number,
): CountedDecision {
  const outcomes: RuleOutcome[] = [];
  let shadowed: string[] | undefined;
  let refusing: RuleOutcome | undefined;
  let refusingRule: ResolvedRule | undefined;
  let deciding: RuleOutcome | undefined;
  let decidingRule: ResolvedRule | undefined;
  let challenged = false;
  let hardBlock = false;

  rules.forEach((rule, i) => {
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
    if (state.allowed) {
      // An answer with no count (the Workers binding) is never disclosed, so it never decides.
      if (
        rule.disclose &&
        state.countUnknown !== true &&
        (deciding === undefined || binds(state, deciding.state))
      ) {
        deciding = outcome;
        decidingRule = rule;
      }
      return;
    }
    const inBand =
      rule.action === "challenge" && !passVerified && state.count < rule.limit * rule.challengeBand;
    if (inBand) challenged = true;
    else {
      hardBlock = true;
      blockCache?.remember(counter, rule, state, now);
    }
    if (refusing === undefined || binds(state, refusing.state)) {
      refusing = outcome;
      refusingRule = rule;
    }
  });

  if (refusing === undefined) {
    return {
      action: "allow",
      reason: "within-limit",
      rule: decidingRule,
      outcome: deciding,
      outcomes,
      rules,
      shadowed: shadowed ?? NO_SHADOWED,
      retryAfterSeconds: 0,
    };
  }
  const challenge = challenged && !hardBlock;
  return {
    action: challenge ? "challenge" : "block",
    reason: challenge ? "challenge-band" : "over-limit",
    rule: refusingRule,
    outcome: refusing,
    outcomes,
    rules,
    shadowed: shadowed ?? NO_SHADOWED,
    retryAfterSeconds: Math.max(1, Math.ceil(refusing.state.retryAfterMs / 1000)),
  };
}

/**
 * Which of two counters' states binds the caller: a refusal before an admission, the longer
 * wait of two refusals, the fewer remaining of two admissions. A decision's rule is chosen by it
 * (among the enforcing rules), and so is each of rls's descriptors' status (among its own).
 */
export function binds(candidate: CounterState, current: CounterState): boolean {
  if (candidate.allowed !== current.allowed) return !candidate.allowed;
  if (!candidate.allowed) return candidate.retryAfterMs > current.retryAfterMs;
  return candidate.remaining < current.remaining;
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
    rules: [rule],
    shadowed: NO_NAMES,
    retryAfterSeconds: Math.max(1, Math.ceil(retryAfterMs / 1000)),
  };
}

/**
 * The store failed or missed the budget: fail closed where a rule or the caller (a `failClosed`
 * path) says so.
 */
export function failMode(
  terms: CallTerms,
  rules: readonly ResolvedRule[],
  failClosed: boolean,
  storeError: string,
): CountedDecision {
  const closedRule = rules.find((rule) => !rule.shadow && rule.failMode === "closed");
  const open = closedRule === undefined && !failClosed;
  return {
    action: open ? "allow" : "unavailable",
    reason: open ? "store-failed-open" : "store-failed-closed",
    rule: closedRule ?? rules[0],
    outcome: undefined,
    outcomes: NO_OUTCOMES,
    rules,
    shadowed: NO_NAMES,
    retryAfterSeconds: open ? 0 : terms.unavailableRetryAfterSeconds,
    storeError,
  };
}
