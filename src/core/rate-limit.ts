/**
 * `createRateLimit`: one limit over a window for any key the caller names, shaped like the
 * Workers binding (`await limiter.limit({ key })`). A thin translation into the core's one way
 * in: the options are a rule (plain-rule.ts), a key is a counter (`counterOf`), and the
 * counting step (count-step.ts) counts it, with the decision budget, the block cache, the fail
 * mode and local counting that every other entry has.
 */
import { checkCost } from "./cost.js";
import { CountingStep } from "./count-step.js";
import { counterOf } from "./counters.js";
import { MAX_WAIT_MS, parseDurationMs, parseWindow } from "./duration.js";
import { EdgelimitError } from "./errors.js";
import { counterKey, escapeKeyPart } from "./keys.js";
import {
  DEFAULT_BUDGET_MS,
  DEFAULT_CONNECT_BUDGET_MS,
  DEFAULT_UNAVAILABLE_RETRY_AFTER_SECONDS,
  type ResolvedRule,
} from "./model.js";
import { checkOptions, type OptionsShape, oneOf, required, STORE } from "./options.js";
import type { CallTerms } from "./outcome.js";
import { plainRule } from "./plain-rule.js";
import type { AlgorithmName, Reason, Store } from "./types.js";

export interface RateLimitOptions {
  readonly store: Store;
  readonly limit: number;
  /** "10s", "60s", "1d", "1mo" (a number is refused: is 3600 an hour or 3.6 seconds?). */
  readonly window: string;
  readonly algorithm?: AlgorithmName;
  /** Separates these counters from others in the same store (default "default"). */
  readonly namespace?: string;
  /**
   * Store time a call waits beyond the store's known round trip before the store counts as
   * failed, as a policy's `budget`: milliseconds, or a duration up to "60s" (default 50 ms).
   */
  readonly budget?: number | string;
  /**
   * When the store has failed (an error, a missed budget, an open circuit breaker), as a
   * policy's rule: `local` (default) counts the key in this process against its limit, `open`
   * admits, `closed` refuses (`reason: "store-failed-closed"`).
   */
  readonly failMode?: "local" | "open" | "closed";
  /** Called with the cause each time the store fails a call. Must not throw. */
  readonly onStoreError?: (error: unknown) => void;
  readonly clock?: () => number;
}

/** Why a key was admitted or refused. */
export type RateLimitReason = Extract<
  Reason,
  | "within-limit"
  | "over-limit"
  | "blocked-cached"
  | "store-failed-local"
  | "store-failed-open"
  | "store-failed-closed"
>;

export interface RateLimitResult {
  readonly success: boolean;
  readonly limit: number;
  /** 0 when nothing was counted (`store-failed-open`, `store-failed-closed`). */
  readonly remaining: number;
  /** Epoch seconds at which the counter is full again; 0 when nothing was counted. */
  readonly reset: number;
  /** Seconds to wait before retrying (0 on success). */
  readonly retryAfterSeconds: number;
  readonly reason: RateLimitReason;
}

export interface RateLimit {
  limit(input: { readonly key: string; readonly cost?: number }): Promise<RateLimitResult>;
}

function rateLimitShape() {
  return {
    store: required(STORE),
    limit: required("number"),
    // A number too, to be refused with the spelling to use (see parseWindow).
    window: required({
      describe: 'a duration such as "60s", "1h" or "1mo"',
      test: (value) => typeof value === "string" || typeof value === "number",
    }),
    algorithm: oneOf("fixed-window", "sliding-window", "token-bucket"),
    namespace: "string",
    budget: ["number", "string"],
    failMode: oneOf("local", "open", "closed"),
    onStoreError: "function",
    clock: "function",
  } satisfies OptionsShape<RateLimitOptions>;
}

/** express-rate-limit's names, which newcomers bring along. */
const EXPRESS_RATE_LIMIT_NAMES = {
  windowMs:
    'express-rate-limit\'s `windowMs` is `window` here, a duration such as "60s" (not milliseconds)',
  max: "express-rate-limit's `max` is `limit` here",
};

/** The id of the one rule, and the scope of its counters' keys. */
const RULE_ID = "limit";

/**
 * The low-level form, shaped like the Workers binding (`await limiter.limit({ key })`), but
 * answering with the numbers the binding does not give: remaining, reset and retry-after.
 */
export function createRateLimit(options: RateLimitOptions): RateLimit {
  if (typeof EDGELIMIT_BUNDLE === "undefined")
    checkOptions("createRateLimit", options, rateLimitShape(), {
      foreign: EXPRESS_RATE_LIMIT_NAMES,
    });
  const { store, limit } = options;
  if (!Number.isInteger(limit) || limit < 0) {
    throw new EdgelimitError(
      "EL_BAD_OPTION",
      `limit must be a whole number of 0 or more; got ${limit}`,
    );
  }
  const namespace = options.namespace ?? "default";
  const rule: ResolvedRule = {
    ...plainRule({
      id: RULE_ID,
      limit,
      window: parseWindow(options.window),
      algorithm: options.algorithm ?? "fixed-window",
      failMode: options.failMode ?? "local",
      shadow: false,
    }),
    namespace,
  };
  const rules = [rule];
  const terms: CallTerms = {
    budgetMs: parseDurationMs(options.budget ?? DEFAULT_BUDGET_MS, {
      bareMilliseconds: true,
      maxMs: MAX_WAIT_MS,
    }),
    connectBudgetMs: DEFAULT_CONNECT_BUDGET_MS,
    unavailableRetryAfterSeconds: DEFAULT_UNAVAILABLE_RETRY_AFTER_SECONDS,
  };
  const onStoreError = options.onStoreError;
  const step = new CountingStep({
    store,
    onStoreError: onStoreError === undefined ? undefined : (error) => onStoreError(error),
  });
  const clock = options.clock ?? Date.now;
  return {
    async limit({ key, cost = 1 }) {
      // 0 checks without counting, as Envoy's `hits_addend: 0`.
      checkCost(cost, "limit({ key, cost })'s cost", 0);
      const subject = `key:${escapeKeyPart(key)}`;
      const counter = counterOf(rule, subject, counterKey(subject, namespace, RULE_ID), cost);
      const counted = await step.count({
        terms,
        rules,
        counters: [counter],
        failClosed: false,
        passVerified: false,
        now: clock(),
        request: undefined,
      });
      const state = counted.outcomes[0]?.state;
      return {
        success: counted.action === "allow",
        limit,
        remaining: state?.remaining ?? 0,
        reset: state === undefined ? 0 : Math.ceil(state.resetAt / 1000),
        retryAfterSeconds: counted.retryAfterSeconds,
        reason: counted.reason as RateLimitReason,
      };
    },
  };
}
