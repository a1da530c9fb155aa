/**
 * A decision as HTTP: status, the client's headers and body, and the headers for the origin.
 * Every runtime's adapter sends what this builds; nothing here decides anything.
 */
import type { Decision } from "../core/decision.js";
import type { ResolvedPolicy, ResolvedRule } from "../core/model.js";
import type { Action, Reason, RuleOutcome, Tier } from "../core/types.js";
import {
  type Disclosed,
  forbiddenBody,
  rateLimitHeaderFields,
  rateLimitPolicyItem,
  rateLimitPolicyOnly,
  sfString,
  tooManyRequestsBody,
  unavailableBody,
} from "./headers.js";

/** A decision with its HTTP response: what `limiter.check` resolves to. */
export interface Verdict {
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
  /** The deciding rule's numbers (the most restrictive rule when allowed). */
  readonly limit: number;
  readonly remaining: number;
  /** Epoch seconds at which the deciding rule resets. */
  readonly reset: number;
  readonly retryAfterSeconds: number;
  /** The rule that decided (undefined when no rule matched). */
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

const NO_HEADERS: Record<string, string> = Object.freeze({}) as Record<string, string>;
const JSON_TYPE = "application/json; charset=utf-8";

/**
 * Presents decisions for one policy. The parts that do not change per request (each rule's id
 * as a structured-field string, `RateLimit-Policy` for a set of fixed-length rules) are built
 * once and reused.
 */
export class Responder {
  readonly #policy: ResolvedPolicy;
  readonly #quotedIds = new Map<ResolvedRule, string>();
  readonly #policyFields = new WeakMap<readonly ResolvedRule[], string>();

  constructor(policy: ResolvedPolicy) {
    this.#policy = policy;
  }

  /** `rawPath` is the request's path as received (its query goes into a challenge redirect). */
  respond(decision: Decision, rawPath: string, now: number): Verdict {
    switch (decision.action) {
      case "allow":
        return this.#allowed(decision, now);
      case "unavailable":
        return verdictOf(decision, {
          status: 503,
          headers: {
            "cache-control": "no-store",
            "retry-after": String(decision.retryAfterSeconds),
            "content-type": JSON_TYPE,
          },
          body: unavailableBody(decision.retryAfterSeconds),
        });
      default:
        if (decision.reason === "denylisted") {
          return verdictOf(decision, {
            status: 403,
            headers: { "cache-control": "no-store", "content-type": JSON_TYPE },
            body: forbiddenBody(),
          });
        }
        return this.#refused(decision, rawPath, now);
    }
  }

  #allowed(decision: Decision, now: number): Verdict {
    const { rule, outcome } = decision;
    // A local count (the store failed) is told like the store's: it is what this process holds to.
    if (decision.reason !== "within-limit" && decision.reason !== "store-failed-local") {
      return verdictOf(decision, {});
    }
    if (rule === undefined || outcome === undefined) {
      // Only approximate rules matched: the quotas can be told, the counts cannot.
      const disclosed = disclosedOf(decision);
      if (disclosed.length === 0) return verdictOf(decision, {});
      const headers: Record<string, string> = {};
      rateLimitPolicyOnly(headers, this.#policy, disclosed, now);
      return verdictOf(decision, { headers });
    }
    const remaining = String(outcome.state.remaining);
    return verdictOf(decision, {
      headers: this.#rateLimitHeaders(decision, rule, outcome, now),
      originHeaders: { [this.#policy.headers.origin]: remaining },
    });
  }

  #refused(decision: Decision, rawPath: string, now: number): Verdict {
    const { rule, outcome } = decision;
    const headers: Record<string, string> = { "cache-control": "no-store" };
    if (rule !== undefined && outcome !== undefined && rule.disclose) {
      Object.assign(headers, this.#rateLimitHeaders(decision, rule, outcome, now));
    }
    if (decision.action === "challenge") {
      const location = challengeLocation(this.#policy.challenge.path, decision.path, rawPath);
      headers.location = location;
      return verdictOf(decision, { status: 302, headers, location });
    }
    headers["retry-after"] = String(decision.retryAfterSeconds);
    headers["content-type"] = JSON_TYPE;
    return verdictOf(decision, {
      status: 429,
      headers,
      body: tooManyRequestsBody(decision.retryAfterSeconds),
    });
  }

  #rateLimitHeaders(
    decision: Decision,
    rule: ResolvedRule,
    outcome: RuleOutcome,
    now: number,
  ): Record<string, string> {
    const policyField = this.#policy.headers.draft ? this.#policyField(decision, now) : "";
    return rateLimitHeaderFields(
      this.#policy,
      rule,
      outcome.state,
      this.#quotedId(rule),
      policyField,
      now,
    );
  }

  #quotedId(rule: ResolvedRule): string {
    let quoted = this.#quotedIds.get(rule);
    if (quoted === undefined) {
      quoted = sfString(rule.id);
      this.#quotedIds.set(rule, quoted);
    }
    return quoted;
  }

  /**
   * `RateLimit-Policy` for the disclosed rules. A decision's rules are the matcher's shared
   * array for its path, so for rules of fixed length the field is built once per array (the
   * full policy check in bench/core.bench.ts shows it).
   */
  #policyField(decision: Decision, now: number): string {
    const known = this.#policyFields.get(decision.rules);
    if (known !== undefined) return known;
    const disclosed = disclosedOf(decision);
    const field = disclosed.map(({ rule }) => rateLimitPolicyItem(rule, now)).join(", ");
    if (disclosed.every(({ rule }) => "ms" in rule.window)) {
      this.#policyFields.set(decision.rules, field);
    }
    return field;
  }
}

/** The disclosed, enforcing rules of a decision with their outcomes. */
function disclosedOf(decision: Decision): Disclosed[] {
  const disclosed: Disclosed[] = [];
  decision.rules.forEach((rule, i) => {
    const outcome = decision.outcomes[i];
    if (outcome !== undefined && !rule.shadow && rule.disclose) disclosed.push({ rule, outcome });
  });
  return disclosed;
}

interface Response {
  readonly status?: number;
  readonly headers?: Record<string, string>;
  readonly originHeaders?: Record<string, string>;
  readonly body?: string;
  readonly location?: string;
}

function verdictOf(decision: Decision, response: Response): Verdict {
  const { rule, outcome } = decision;
  const state = outcome?.state;
  return {
    action: decision.action,
    reason: decision.reason,
    status: response.status ?? 200,
    headers: response.headers ?? NO_HEADERS,
    originHeaders: response.originHeaders ?? NO_HEADERS,
    body: response.body,
    limit: state === undefined || rule === undefined ? 0 : rule.limit,
    remaining: state?.remaining ?? 0,
    reset: state === undefined ? 0 : Math.ceil(state.resetAt / 1000),
    retryAfterSeconds: decision.retryAfterSeconds,
    rule: rule?.id,
    tier: decision.tier,
    plan: decision.plan,
    subject: decision.subject,
    path: decision.path,
    outcomes: decision.outcomes,
    shadowed: decision.shadowed,
    location: response.location,
    durationMs: decision.durationMs,
    storeError: decision.storeError,
  };
}

/**
 * The challenge page URL. The redirect target is the normalised path (never `//host`, so never
 * another origin) plus the original query string.
 */
export function challengeLocation(challengePath: string, path: string, rawPath: string): string {
  const queryAt = rawPath.indexOf("?");
  const query = queryAt === -1 ? "" : rawPath.slice(queryAt).split("#")[0];
  return `${challengePath}?redirect=${encodeURIComponent(path + (query ?? ""))}`;
}
