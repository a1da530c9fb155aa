/**
 * What the engine decides for one request, before anything is said in HTTP (`http/respond.ts`
 * turns a decision into status, headers and body).
 */
import type { ResolvedRule } from "./model.js";
import type { Action, Reason, RuleOutcome, Tier } from "./types.js";

export interface Decision {
  readonly action: Action;
  readonly reason: Reason;
  /**
   * The rule that decided: the refusing rule with the longest wait, or, when admitted, the most
   * restrictive disclosed rule whose count is known (what the client is told). Undefined when
   * no rule matched, or when the store failed open.
   */
  readonly rule: ResolvedRule | undefined;
  /** The deciding rule's outcome (its counter's state), when it has one. */
  readonly outcome: RuleOutcome | undefined;
  /** Every rule that counted this request, shadow rules included, in match order. */
  readonly outcomes: readonly RuleOutcome[];
  /** The rules that matched (in the order of `outcomes`), disclosed or not. */
  readonly rules: readonly ResolvedRule[];
  /** Shadow rules that would have refused the request. */
  readonly shadowed: readonly string[];
  /** Seconds until the client may pass again (refusals); 0 when admitted. */
  readonly retryAfterSeconds: number;
  readonly tier: Tier;
  readonly plan: string | undefined;
  /** The encoded subject the request is reported as (`ip:203.0.113.0/64`, `user:u_abc`). */
  readonly subject: string;
  /** The normalised path the rules matched against. */
  readonly path: string;
  /** Milliseconds the decision took. */
  readonly durationMs: number;
  /** Why the store failed, for `store-failed-open`, `-closed` and `-local` decisions. */
  readonly storeError?: string | undefined;
}
