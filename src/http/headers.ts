import { formatWindow } from "../core/duration.js";
import type { ResolvedPolicy, ResolvedRule } from "../core/model.js";
import { escapeUtf8 } from "../core/path.js";
import type { CounterState, RuleOutcome } from "../core/types.js";
import { windowLengthMs } from "../core/windows.js";

export { DEFAULT_ORIGIN_HEADER } from "../core/model.js";

/** One outcome with the rule it came from, as the header builders need them. */
export interface Disclosed {
  readonly rule: ResolvedRule;
  readonly outcome: RuleOutcome;
  /** Precomputed `rateLimitPolicyItem(rule)` and `sfString(rule.id)`, when the caller has them. */
  readonly policyItem?: string;
  readonly quotedId?: string;
}

/**
 * A structured-field string (RFC 9651): quoted, with `\` and `"` escaped. It holds printable
 * ASCII only, and a header value that holds more is refused by Node and by `Headers`: anything
 * else (a rule id with a non-ASCII path, `anonymous.path./préférences`) goes out percent-encoded
 * as UTF-8, as the path itself travels.
 */
export function sfString(text: string): string {
  const quoted = text.replace(/[\\"]/g, (char) => `\\${char}`);
  return `"${quoted.replace(/[^\x20-\x7e]/gu, escapeUtf8)}"`;
}

/**
 * The rate-limit headers for a response: the informal `X-RateLimit-*` trio (reset in epoch
 * seconds, as the seed and most clients expect) and the IETF draft-11 fields:
 * `RateLimit-Policy: "anonymous.global";q=60;w=60` for every disclosed rule and
 * `RateLimit: "anonymous.global";r=12;t=41` for the one that binds.
 */
export function rateLimitHeaders(
  headers: Record<string, string>,
  policy: ResolvedPolicy,
  deciding: Disclosed,
  disclosed: readonly Disclosed[],
  now: number,
): void {
  Object.assign(
    headers,
    rateLimitHeaderFields(
      policy,
      deciding.rule,
      deciding.outcome.state,
      deciding.quotedId ?? sfString(deciding.rule.id),
      policy.headers.draft ? policyField(disclosed, now) : "",
      now,
    ),
  );
}

/**
 * `rateLimitHeaders` from its parts, as a new object: the deciding rule and its state, the
 * rule's id as a structured-field string, and the `RateLimit-Policy` field already built.
 */
export function rateLimitHeaderFields(
  policy: ResolvedPolicy,
  rule: ResolvedRule,
  state: CounterState,
  quotedId: string,
  policyFieldText: string,
  now: number,
): Record<string, string> {
  const { legacy, draft } = policy.headers;
  // An answer with no count (the Workers binding) tells the limit, not the count.
  const known = state.countUnknown !== true;
  const limit = String(rule.limit);
  const remaining = String(state.remaining);
  const reset = String(Math.ceil(state.resetAt / 1000));
  const binding = `${quotedId};r=${remaining};t=${Math.max(0, Math.ceil((state.resetAt - now) / 1000))}`;
  // The usual case (every header on, the count known) as one literal.
  if (legacy && draft && known) {
    return {
      "x-ratelimit-limit": limit,
      "x-ratelimit-remaining": remaining,
      "x-ratelimit-reset": reset,
      "ratelimit-policy": policyFieldText,
      ratelimit: binding,
    };
  }
  const headers: Record<string, string> = {};
  if (legacy) headers["x-ratelimit-limit"] = limit;
  if (legacy && known) {
    headers["x-ratelimit-remaining"] = remaining;
    headers["x-ratelimit-reset"] = reset;
  }
  if (draft) headers["ratelimit-policy"] = policyFieldText;
  if (draft && known) headers.ratelimit = binding;
  return headers;
}

/**
 * The quotas alone (the smallest limit and `RateLimit-Policy`), for a response where no matched
 * rule's count is known.
 */
export function rateLimitPolicyOnly(
  headers: Record<string, string>,
  policy: ResolvedPolicy,
  disclosed: readonly Disclosed[],
  now: number,
): void {
  if (policy.headers.legacy) {
    let limit = Number.POSITIVE_INFINITY;
    for (const entry of disclosed) limit = Math.min(limit, entry.rule.limit);
    headers["x-ratelimit-limit"] = String(limit);
  }
  if (policy.headers.draft) headers["ratelimit-policy"] = policyField(disclosed, now);
}

function policyField(disclosed: readonly Disclosed[], now: number): string {
  let field = "";
  for (const entry of disclosed) {
    const item = entry.policyItem ?? rateLimitPolicyItem(entry.rule, now);
    field = field === "" ? item : `${field}, ${item}`;
  }
  return field;
}

/** One rule's item in `RateLimit-Policy`: `"anonymous.global";q=60;w=60`. */
export function rateLimitPolicyItem(rule: ResolvedRule, now: number): string {
  const seconds = Math.round(windowLengthMs(rule.window, now) / 1000);
  return `${sfString(rule.id)};q=${rule.limit};w=${seconds}`;
}

export interface RefusalBody {
  readonly error: "rate_limit_exceeded" | "rate_limit_unavailable" | "forbidden";
  readonly message: string;
  readonly retry_after?: number;
}

export function tooManyRequestsBody(retryAfterSeconds: number): string {
  const body: RefusalBody = {
    error: "rate_limit_exceeded",
    message: `Too many requests. Try again in ${retryAfterSeconds} second${retryAfterSeconds === 1 ? "" : "s"}.`,
    retry_after: retryAfterSeconds,
  };
  return JSON.stringify(body);
}

export function unavailableBody(retryAfterSeconds: number): string {
  const body: RefusalBody = {
    error: "rate_limit_unavailable",
    message: "Service temporarily unavailable. Try again shortly.",
    retry_after: retryAfterSeconds,
  };
  return JSON.stringify(body);
}

export function forbiddenBody(): string {
  const body: RefusalBody = { error: "forbidden", message: "Access denied." };
  return JSON.stringify(body);
}

/** A rule's window for humans: "60 per 60s". */
export function describeRuleLimit(rule: ResolvedRule): string {
  return `${rule.limit} per ${formatWindow(rule.window)}`;
}
