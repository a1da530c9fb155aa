/**
 * A verdict: a `Decision` with its HTTP response, what `limiter.check` resolves to. It carries
 * the decision itself (`verdict.decision`); the fields a decision has (`action`, `reason`,
 * `tier`, `subject`, ...) are read from it, not copied, and only the response (status, headers,
 * body, the challenge's location) is the verdict's own.
 */
import type { Decision } from "../core/decision.js";
import type { Action, Reason, RuleOutcome, Tier } from "../core/types.js";

export interface Verdict {
  /** The decision this verdict answers with (its rules, the deciding rule's outcome, ...). */
  readonly decision: Decision;
  readonly action: Action;
  readonly reason: Reason;
  /** HTTP status to answer with when not allowed (429, 302, 503, 403); 200 when allowed. */
  readonly status: number;
  /** Headers for the client's response (on 429/503 and on allowed responses alike). */
  readonly headers: Record<string, string>;
  /** Headers to set on the request forwarded to the origin (allowed requests only). */
  readonly originHeaders: Record<string, string>;
  /** JSON body for a refusal, undefined when allowed. */
  readonly body: string | undefined;
  /** The deciding rule's numbers (the most restrictive rule when allowed); 0 without a count. */
  readonly limit: number;
  readonly remaining: number;
  /** Epoch seconds at which the deciding rule resets. */
  readonly reset: number;
  readonly retryAfterSeconds: number;
  /** The id of the rule that decided (undefined when no rule matched). */
  readonly rule: string | undefined;
  readonly tier: Tier;
  readonly plan: string | undefined;
  /** The encoded subject that was counted (`ip:203.0.113.0/64`, `user:u_abc`). */
  readonly subject: string;
  /** Normalised path the rules matched against. */
  readonly path: string;
  /** Every rule that counted this request, shadow rules included. */
  readonly outcomes: readonly RuleOutcome[];
  /** Shadow rules that would have refused the request. */
  readonly shadowed: readonly string[];
  /** Location for a challenge redirect. */
  readonly location: string | undefined;
  /** Time the decision took, milliseconds. */
  readonly durationMs: number;
  /** Why the store failed, for `store-failed-open`, `-closed` and `-local` verdicts. */
  readonly storeError?: string | undefined;
}

/** The response part of a verdict, which `Responder` builds. */
export interface VerdictResponse {
  readonly status?: number;
  readonly headers?: Record<string, string>;
  readonly originHeaders?: Record<string, string>;
  readonly body?: string;
  readonly location?: string;
}

const NO_HEADERS: Record<string, string> = Object.freeze({}) as Record<string, string>;

/**
 * A decision and its response; the decision's fields are read through (getters, so a spread
 * `{ ...verdict }` copies only the response and `decision`). `JSON.stringify` writes every field
 * but `decision`, as a log line wants it.
 */
export class DecisionVerdict implements Verdict {
  readonly decision: Decision;
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly originHeaders: Record<string, string>;
  readonly body: string | undefined;
  readonly location: string | undefined;

  constructor(decision: Decision, response: VerdictResponse) {
    this.decision = decision;
    this.status = response.status ?? 200;
    this.headers = response.headers ?? NO_HEADERS;
    this.originHeaders = response.originHeaders ?? NO_HEADERS;
    this.body = response.body;
    this.location = response.location;
  }

  get action(): Action {
    return this.decision.action;
  }

  get reason(): Reason {
    return this.decision.reason;
  }

  get limit(): number {
    const { rule, outcome } = this.decision;
    return outcome === undefined || rule === undefined ? 0 : rule.limit;
  }

  get remaining(): number {
    return this.decision.outcome?.state.remaining ?? 0;
  }

  get reset(): number {
    const state = this.decision.outcome?.state;
    return state === undefined ? 0 : Math.ceil(state.resetAt / 1000);
  }

  get retryAfterSeconds(): number {
    return this.decision.retryAfterSeconds;
  }

  get rule(): string | undefined {
    return this.decision.rule?.id;
  }

  get tier(): Tier {
    return this.decision.tier;
  }

  get plan(): string | undefined {
    return this.decision.plan;
  }

  get subject(): string {
    return this.decision.subject;
  }

  get path(): string {
    return this.decision.path;
  }

  get outcomes(): readonly RuleOutcome[] {
    return this.decision.outcomes;
  }

  get shadowed(): readonly string[] {
    return this.decision.shadowed;
  }

  get durationMs(): number {
    return this.decision.durationMs;
  }

  get storeError(): string | undefined {
    return this.decision.storeError;
  }

  toJSON(): Omit<Verdict, "decision"> {
    return {
      action: this.action,
      reason: this.reason,
      status: this.status,
      headers: this.headers,
      originHeaders: this.originHeaders,
      body: this.body,
      limit: this.limit,
      remaining: this.remaining,
      reset: this.reset,
      retryAfterSeconds: this.retryAfterSeconds,
      rule: this.rule,
      tier: this.tier,
      plan: this.plan,
      subject: this.subject,
      path: this.path,
      outcomes: this.outcomes,
      shadowed: this.shadowed,
      location: this.location,
      durationMs: this.durationMs,
      storeError: this.storeError,
    };
  }
}
