import { parseWindow } from "./duration.js";
import { EdgelimitError } from "./errors.js";
import { counterKey, escapeKeyPart } from "./keys.js";
import { checkOptions, type OptionsShape, oneOf, required, STORE } from "./options.js";
import type { AlgorithmName, CounterSpec, Store } from "./types.js";

export interface RateLimitOptions {
  readonly store: Store;
  readonly limit: number;
  /** "10s", "60s", "1d", "1mo" (a number is refused: is 3600 an hour or 3.6 seconds?). */
  readonly window: string;
  readonly algorithm?: AlgorithmName;
  /** Separates these counters from others in the same store (default "default"). */
  readonly namespace?: string;
  readonly clock?: () => number;
}

export interface RateLimitResult {
  readonly success: boolean;
  readonly limit: number;
  readonly remaining: number;
  /** Epoch seconds at which the counter is full again. */
  readonly reset: number;
  /** Seconds to wait before retrying (0 on success). */
  readonly retryAfterSeconds: number;
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
    clock: "function",
  } satisfies OptionsShape<RateLimitOptions>;
}

/** express-rate-limit's names, which newcomers bring along. */
const EXPRESS_RATE_LIMIT_NAMES = {
  windowMs:
    'express-rate-limit\'s `windowMs` is `window` here, a duration such as "60s" (not milliseconds)',
  max: "express-rate-limit's `max` is `limit` here",
};

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
  const window = parseWindow(options.window);
  const algorithm = options.algorithm ?? "fixed-window";
  const namespace = options.namespace ?? "default";
  const clock = options.clock ?? Date.now;
  return {
    async limit({ key, cost = 1 }) {
      if (!Number.isInteger(cost) || cost < 0) {
        throw new EdgelimitError(
          "EL_BAD_OPTION",
          `cost must be a whole number of 0 or more; got ${cost}`,
        );
      }
      const subject = `key:${escapeKeyPart(key)}`;
      const counter: CounterSpec = {
        key: counterKey(subject, namespace, "limit"),
        subject,
        algorithm,
        limit,
        window,
        cost,
        mode: "enforce",
        ruleId: "limit",
        namespace,
      };
      const now = clock();
      const [state] = await store.apply([counter], now);
      if (state === undefined)
        throw new EdgelimitError("EL_STORE_FAILED", `store "${store.name}" returned no state`);
      return {
        success: state.allowed,
        limit,
        remaining: state.remaining,
        reset: Math.ceil(state.resetAt / 1000),
        retryAfterSeconds: state.allowed ? 0 : Math.max(1, Math.ceil(state.retryAfterMs / 1000)),
      };
    },
  };
}
