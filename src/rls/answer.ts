/**
 * What the service answers one `ShouldRateLimit` (over gRPC or `POST /json`) with, and what it
 * records of it for metrics and the dashboard.
 */
import type { Action, Reason, Tier } from "../core/types.js";
import type { RateLimitResponse } from "./messages.js";

/** A decision as the admin listener counts it (the fields of a Verdict that metrics read). */
export interface DecisionRecord {
  readonly action: Action;
  readonly reason: Reason;
  /** The rule (configured descriptor or policy rule) that decided; undefined when none did. */
  readonly rule: string | undefined;
  readonly tier: Tier;
  readonly subject: string;
  readonly durationMs: number;
  /**
   * The rules that would have refused the call had they been enforced: a policy's shadow rules,
   * `shadow_mode` descriptors over their limit, and under `SHADOW_MODE` the limits that would
   * have made the answer OVER_LIMIT.
   */
  readonly shadowed: readonly string[];
}

export interface RlsAnswer {
  /** Undefined when a fail-closed rule's store failed (`unavailable` says why). */
  readonly response: RateLimitResponse | undefined;
  readonly unavailable: { readonly cause: string; readonly retryAfterSeconds: number } | undefined;
  readonly record: DecisionRecord;
}

/** `Retry-After` for a refusal: whole seconds, at least 1. */
export function retryAfterHeader(retryAfterMs: number): { key: string; value: string } {
  return { key: "retry-after", value: String(Math.max(1, Math.ceil(retryAfterMs / 1000))) };
}
