/**
 * `ShouldRateLimit` against a `--policy` when every descriptor says `hits_addend: 0`: a look
 * without counting, answered by `limiter.peek` (src/core/peek.ts), so the service and the
 * library report the same limit, remaining and reset for a request. A peek refuses nothing:
 * every status is OK, with the numbers of the rule `check` would report (the disclosed,
 * enforcing rule with the least remaining). A call where some descriptors count is decided as
 * any other (policy-decide.ts): the policy counts a request once, at the request's
 * `hits_addend`.
 */

import type { ResolvedPolicy } from "../core/model.js";
import type { Peek, PeekedRule } from "../core/peek.js";
import type { RlsAnswer } from "./answer.js";
import { CODE, type DescriptorStatus, type RateLimitRequest } from "./messages.js";

/** Whether a call asks to look without counting: each of its descriptors says `hits_addend: 0`. */
export function isPeek(request: RateLimitRequest): boolean {
  return (
    request.descriptors.length > 0 &&
    request.descriptors.every((descriptor) => descriptor.hitsAddend === 0)
  );
}

export function peekAnswer(
  peek: Peek,
  request: RateLimitRequest,
  policy: ResolvedPolicy,
  unitOf: (ruleId: string) => number,
  now: number,
  durationMs: number,
): RlsAnswer {
  const chosen = reportedRule(peek, policy);
  const status: DescriptorStatus =
    chosen === undefined
      ? {
          code: CODE.OK,
          currentLimit: undefined,
          limitRemaining: 0,
          durationUntilResetMs: undefined,
        }
      : {
          code: CODE.OK,
          currentLimit: {
            name: chosen.rule,
            requestsPerUnit: chosen.limit,
            unit: unitOf(chosen.rule),
          },
          limitRemaining: chosen.remaining,
          durationUntilResetMs: Math.max(0, chosen.reset * 1000 - now),
        };
  return {
    response: {
      overallCode: CODE.OK,
      statuses: request.descriptors.map(() => status),
      responseHeadersToAdd: [],
      requestHeadersToAdd: [],
    },
    unavailable: undefined,
    record: {
      action: "allow",
      reason: peek.reason === "matched" ? "within-limit" : peek.reason,
      rule: chosen?.rule,
      tier: peek.tier,
      subject: peek.subject,
      durationMs,
      shadowed: [],
    },
  };
}

/** The rule a verdict would report: disclosed, enforcing, its count known, the least remaining. */
function reportedRule(peek: Peek, policy: ResolvedPolicy): PeekedRule | undefined {
  let chosen: PeekedRule | undefined;
  for (const peeked of peek.rules) {
    if (peeked.shadow || peeked.countUnknown === true) continue;
    const rule = policy.rules.find((candidate) => candidate.id === peeked.rule);
    if (rule?.disclose !== true) continue;
    if (chosen === undefined || peeked.remaining < chosen.remaining) chosen = peeked;
  }
  return chosen;
}
