/**
 * `peek`: what `decide` would report for each rule a request matches (its limit, what is left,
 * when it resets), counting nothing. A dashboard, a support tool or a client asking "how much
 * is left?" (Upstash's `getRemaining`) must not spend what it asks about.
 *
 * A peek is the request's counters with a cost of 0 sent to the store in one call: the `Store`
 * contract reads a counter at cost 0, and every store writes nothing for it (no key made, no
 * expiry set, no window moved, no reservation taken: the conformance suite, test/core/peek.test.ts
 * and test/redis/peek.test.ts hold them to it). rls's `hits_addend: 0` goes to the store the same
 * way, so both report the same numbers for a counter. What a peek leaves alone, on purpose:
 *
 * - the block cache: neither asked nor told. The store's count is the truth; a block the cache
 *   holds shows there as `remaining: 0` until its window moves on;
 * - the decisions' observers and metrics (`onDecision`, `onStoreError`): a peek is no decision;
 * - what this process owes the store after counting alone while it was failed (store-debt.ts):
 *   paid only by a call that counts; until then a peek reports the store's count without it;
 * - hybrid counting: a cost-0 counter is read in the store as an exact one (hybrid/spend.ts),
 *   never spent from or reserved for. Its count is the store's, which includes the units every
 *   process reserved and has not spent yet: `remaining` is then at most what is really left.
 *
 * When the store fails or misses the policy's budget, a peek still resolves (as `check` does):
 * `storeError` says why, a `failMode: local` rule reports what this process counted for it
 * locally (what `check` would hold it to, read without counting), and any other rule reports
 * `countUnknown`, its numbers placeholders.
 */
import type { CountingStep, Read } from "./count-step.js";
import type { CounterBuilder } from "./counters.js";
import type { Identifier, Identity } from "./identify.js";
import { primarySubject } from "./identify.js";
import type { Address } from "./ip.js";
import type { Match, RuleMatcher } from "./match.js";
import type { ResolvedPolicy, ResolvedRule } from "./model.js";
import { normalizePath } from "./path.js";
import type { CounterSpec, CounterState, PassVerifier, RequestDescription, Tier } from "./types.js";

/** One matched rule, as `check` would report it. */
export interface PeekedRule {
  /** The rule's id (`anonymous.global`). */
  readonly rule: string;
  readonly namespace: string;
  /** The rule's limit, as a verdict's `limit`. */
  readonly limit: number;
  /** Units still available now, as a verdict's `remaining` (a pass holder's: to its band). */
  readonly remaining: number;
  /** Epoch seconds at which the counter is back to full capacity, as a verdict's `reset`. */
  readonly reset: number;
  /** A shadow rule: it counts and reports, and never refuses. */
  readonly shadow: boolean;
  /**
   * The count is not known: `remaining` and `reset` are placeholders (0). The Workers
   * `ratelimits` binding answers no count; a failed store, none for a rule that does not count
   * locally.
   */
  readonly countUnknown?: true;
}

/** What `limiter.peek` resolves to. */
export interface Peek {
  /**
   * `matched`: `rules` lists every rule the request matches, with the limits overrides give
   * them (a rule an `allow` override takes out is left out). Otherwise no rule would count it,
   * and `rules` is empty: `allowlisted`, `denylisted`, `override-block`, `override-allow` (as
   * `check`'s reasons), or `no-rule`.
   */
  readonly reason:
    | "matched"
    | "allowlisted"
    | "denylisted"
    | "no-rule"
    | "override-block"
    | "override-allow";
  /** Every matched rule, shadow rules included, in match order. */
  readonly rules: readonly PeekedRule[];
  readonly tier: Tier;
  readonly plan: string | undefined;
  /** The subject the request is counted as (`ip:203.0.113.7`, `user:u_abc`). */
  readonly subject: string;
  /** The normalised path the rules matched against. */
  readonly path: string;
  /** Why the store failed, when it did (see the top of this file). */
  readonly storeError?: string | undefined;
}

/** What a peek needs of the engine (engine.ts passes its prepared policy and its parts). */
export interface PeekContext {
  readonly policy: ResolvedPolicy;
  readonly identifier: Identifier;
  readonly matcher: RuleMatcher;
  readonly counters: CounterBuilder;
  readonly clock: () => number;
  /** The counting step's read (count-step.ts): one store call at cost 0, within the budget. */
  readonly read: (
    rules: readonly ResolvedRule[],
    counters: readonly CounterSpec[],
    now: number,
  ) => Promise<Read>;
  /** The counting step's overrides applied to these rules and counters (count-step.ts). */
  readonly overridden: CountingStep["overridden"];
  /** The list an address is on, if any: the denylist first, as `decide` checks them. */
  readonly listedAs: (address: Address | undefined) => "allowlisted" | "denylisted" | undefined;
  readonly passes: PassVerifier | undefined;
}

const NO_RULES: readonly PeekedRule[] = Object.freeze([]);

/**
 * The request's `cost` is ignored: a peek reports what is left, not whether a request of some
 * cost would pass.
 */
export async function peekRequest(
  request: RequestDescription,
  context: PeekContext,
): Promise<Peek> {
  const started = context.clock();
  const path = normalizePath(request.path);
  const identity = await context.identifier.identify(request, started);
  const about = {
    tier: identity.tier,
    plan: identity.plan,
    subject: primarySubject(identity),
    path,
  };
  const listed = context.listedAs(identity.address);
  if (listed !== undefined) return { ...about, reason: listed, rules: NO_RULES };
  const match = context.matcher.match(identity, path, request);
  if (match.compiled.length === 0) return { ...about, reason: "no-rule", rules: NO_RULES };
  const verified = await passVerified(request, identity, match, context, started);
  const built = context.counters
    .countersFor(match.compiled, identity, undefined, verified)
    .map((counter) => ({ ...counter, cost: 0 }));
  const now = context.clock();
  const overridden = context.overridden(match.rules, built, verified, now);
  if ("action" in overridden) {
    const reason = overridden.reason === "override-block" ? "override-block" : "override-allow";
    return { ...about, reason, rules: NO_RULES };
  }
  const read = await context.read(overridden.rules, overridden.counters, now);
  const rules = overridden.rules.map((rule, i) => peeked(rule, read.states[i]));
  if (read.storeError === undefined) return { ...about, reason: "matched", rules };
  return { ...about, reason: "matched", rules, storeError: read.storeError };
}

/** A pass counts as `decide` counts it: checked only when a matched rule challenges. */
function passVerified(
  request: RequestDescription,
  identity: Identity,
  match: Match,
  context: PeekContext,
  now: number,
): boolean | Promise<boolean> {
  if (request.passVerified === true) return true;
  const passes = context.passes;
  if (passes === undefined || !match.rules.some((rule) => rule.action === "challenge")) {
    return false;
  }
  return passes.verify(request, primarySubject(identity), now);
}

function peeked(
  rule: ResolvedPolicy["rules"][number],
  state: CounterState | undefined,
): PeekedRule {
  const about = {
    rule: rule.id,
    namespace: rule.namespace,
    limit: rule.limit,
    shadow: rule.shadow,
  };
  if (state === undefined || state.countUnknown === true) {
    return { ...about, remaining: 0, reset: 0, countUnknown: true };
  }
  return { ...about, remaining: state.remaining, reset: Math.ceil(state.resetAt / 1000) };
}
