import type { Logger } from "pino";
import type { Verdict } from "../http/respond.js";

/**
 * One JSON line per refused, challenged or failed (open or counted locally) decision, one per
 * decision a shadow rule would have refused (admitted, `info`, with `shadowed`: trying a rule in
 * shadow is asking which requests it would refuse, so none is sampled away), and one per
 * `1 / sampleRate` other allowed ones (deterministically, every Nth: no randomness to reason
 * about in an incident).
 */
export class DecisionLog {
  readonly #logger: Logger;
  readonly #allowEvery: number;
  #allowedSeen = 0;

  constructor(logger: Logger, allowedSampleRate: number) {
    this.#logger = logger;
    this.#allowEvery =
      allowedSampleRate <= 0
        ? Number.POSITIVE_INFINITY
        : Math.max(1, Math.round(1 / allowedSampleRate));
  }

  record(verdict: Verdict, method: string | undefined): void {
    const failed =
      verdict.reason === "store-failed-open" || verdict.reason === "store-failed-local";
    if (verdict.action === "allow" && !failed && verdict.shadowed.length === 0) {
      this.#allowedSeen++;
      if (this.#allowedSeen % this.#allowEvery !== 0) return;
    }
    const entry = {
      msg: "decision",
      action: verdict.action,
      reason: verdict.reason,
      status: verdict.status,
      rule: verdict.rule,
      tier: verdict.tier,
      plan: verdict.plan,
      subject: verdict.subject,
      method,
      path: verdict.path,
      limit: verdict.limit,
      remaining: verdict.remaining,
      retryAfter: verdict.retryAfterSeconds,
      shadowed: verdict.shadowed.length > 0 ? verdict.shadowed : undefined,
      durationMs: Math.round(verdict.durationMs * 1000) / 1000,
      storeError: verdict.storeError,
    };
    if (verdict.action === "allow" && !failed) this.#logger.info(entry);
    else this.#logger.warn(entry);
  }
}
