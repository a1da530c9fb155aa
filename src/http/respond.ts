/**
 * A decision as HTTP: status, the client's headers and body, and the headers for the origin.
 * Every runtime's adapter sends what this builds; nothing here decides anything.
 */
import type { Decision } from "../core/decision.js";
import type { ResolvedPolicy, ResolvedRule } from "../core/model.js";
import type { RuleOutcome } from "../core/types.js";
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
import { DecisionVerdict, type Verdict, type VerdictResponse } from "./verdict.js";

export type { Verdict } from "./verdict.js";

const JSON_TYPE = "application/json; charset=utf-8";

/**
 * Presents decisions for one policy. The parts that do not change per request (each rule's id
 * as a structured-field string, `RateLimit-Policy` for a set of fixed-length rules) are built
 * once and reused.
 */
export class Responder {
  readonly #policy: ResolvedPolicy;
  // Weak: an override's limit makes rule objects of its own (core/override-table.ts).
  readonly #quotedIds = new WeakMap<ResolvedRule, string>();
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
        // A subject an operator blocked is refused as a denylisted address is: no wait helps.
        if (decision.reason === "denylisted" || decision.reason === "override-block") {
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

function verdictOf(decision: Decision, response: VerdictResponse): Verdict {
  return new DecisionVerdict(decision, response);
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
