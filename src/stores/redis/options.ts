import { EdgelimitError } from "../../core/errors.js";
import { type OptionsShape, oneOf, positiveMs } from "../../core/options.js";
import { breakerOption, type CircuitBreakerOptions } from "../remote/breaker.js";

/** What the two stores that run the script take beside their connection (redis, redis-rest). */
export interface ScriptStoreOptions {
  /** Prepended to every key (default `el:`; both stores count the same keys). */
  readonly prefix?: string;
  /**
   * `server` (default): the script reads Redis `TIME`, so processes with skewed clocks agree.
   * `caller`: the `now` the limiter passes; for simulations and tests that drive time.
   */
  readonly clock?: "server" | "caller";
  /** Circuit breaker settings, or `false` to turn it off. */
  readonly breaker?: CircuitBreakerOptions | false;
  /**
   * A call still unanswered after this long has failed, and counts as a failure for the
   * breaker (default 1000 ms). Measured like the decision budget: a reply already in this
   * process, waiting behind our own work, is read before the call is declared lost.
   */
  readonly timeoutMs?: number;
  /**
   * Requests that arrive in the same turn of the event loop share one script call, up to this many (default 64;
   * 1 turns batching off). Each request is still applied atomically and in order inside the
   * script; the batch only saves per-call overhead in the process and in Redis.
   */
  readonly maxBatch?: number;
}

/** The run-time check's view of `ScriptStoreOptions` (see core/options.ts). */
export function scriptStoreShape() {
  return {
    prefix: "string",
    clock: oneOf("server", "caller"),
    breaker: breakerOption(),
    timeoutMs: "number",
    maxBatch: "number",
  } satisfies OptionsShape<ScriptStoreOptions>;
}

export interface ScriptStoreSettings {
  readonly prefix: string;
  readonly serverClock: boolean;
  readonly breaker: CircuitBreakerOptions | false | undefined;
  readonly timeoutMs: number;
  readonly maxBatch: number;
}

const DEFAULT_PREFIX = "el:";
const DEFAULT_MAX_BATCH = 64;
const DEFAULT_TIMEOUT_MS = 1000;

/** The options with their defaults, checked; errors name `factory` (`redisStore`). */
export function scriptStoreSettings(
  options: ScriptStoreOptions,
  factory: string,
  defaultMaxBatch = DEFAULT_MAX_BATCH,
): ScriptStoreSettings {
  const maxBatch = options.maxBatch ?? defaultMaxBatch;
  if (!Number.isInteger(maxBatch) || maxBatch < 1) {
    throw new EdgelimitError(
      "EL_STORE_OPTION",
      `${factory}: maxBatch must be a whole number of at least 1; got ${maxBatch}`,
    );
  }
  const timeoutMs = positiveMs(options.timeoutMs ?? DEFAULT_TIMEOUT_MS, factory, "timeoutMs");
  return {
    prefix: options.prefix ?? DEFAULT_PREFIX,
    serverClock: (options.clock ?? "server") === "server",
    breaker: options.breaker,
    timeoutMs,
    maxBatch,
  };
}
