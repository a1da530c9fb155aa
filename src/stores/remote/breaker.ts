import { EdgelimitError } from "../../core/errors.js";
import { checkOptions, fields, type OptionsShape } from "../../core/options.js";

export interface CircuitBreakerOptions {
  /** Consecutive failures that open the circuit (default 5). */
  readonly failureThreshold?: number;
  /** How long an open circuit fails fast before letting one probe through (default 250 ms). */
  readonly cooldownMs?: number;
}

const BREAKER_FIELDS = {
  failureThreshold: "number",
  cooldownMs: "number",
} satisfies OptionsShape<CircuitBreakerOptions>;

/** A store's `breaker` option, as its run-time check takes it: settings, or `false` for none. */
export function breakerOption() {
  return [false, fields(BREAKER_FIELDS)] as const;
}

export type BreakerState = "closed" | "open" | "probing";

const DEFAULT_FAILURE_THRESHOLD = 5;
const DEFAULT_COOLDOWN_MS = 250;
const DEFAULT_OWNER = "store";

/**
 * The runtime's monotonic clock. A wall clock (`Date.now`) can step: NTP setting it back an
 * hour would keep an open circuit open for that hour, and a step forward would end cooldowns
 * early.
 */
export const monotonicNow: () => number = () => performance.now();

/**
 * Stops a store from hammering a server that is down or drowning, and stops decisions from
 * waiting for it. After `failureThreshold` consecutive failures every call fails at once for
 * `cooldownMs`; then exactly one call goes through as a probe. Its success closes the circuit,
 * its failure opens it for another cooldown. Failing fast is safe because the limiter turns a
 * failed call into the rule's fail mode (a local count, a pass or a 503) without waiting for its
 * time budget.
 *
 * Time is read from `clock`, a monotonic clock by default (`monotonicNow`), never from the wall.
 */
export class CircuitBreaker {
  readonly failureThreshold: number;
  readonly cooldownMs: number;
  readonly #clock: () => number;
  #state: BreakerState = "closed";
  #consecutiveFailures = 0;
  #openedAt = 0;
  /** Calls refused without reaching the server since start. */
  rejected = 0;
  /** Times the circuit opened since start. */
  opened = 0;

  /** `owner` names the store in error messages (`redisStore`). */
  constructor(
    options: CircuitBreakerOptions = {},
    clock: () => number = monotonicNow,
    owner = DEFAULT_OWNER,
  ) {
    const name = owner === DEFAULT_OWNER ? "CircuitBreaker" : `${owner}: breaker`;
    if (typeof EDGELIMIT_BUNDLE === "undefined")
      checkOptions(name, options, BREAKER_FIELDS, { code: "EL_STORE_OPTION" });
    const failureThreshold = options.failureThreshold ?? DEFAULT_FAILURE_THRESHOLD;
    const cooldownMs = options.cooldownMs ?? DEFAULT_COOLDOWN_MS;
    if (!Number.isInteger(failureThreshold) || failureThreshold < 1) {
      throw new EdgelimitError(
        "EL_STORE_OPTION",
        `${owner}: breaker.failureThreshold must be a whole number of at least 1; got ${failureThreshold}`,
      );
    }
    if (!Number.isFinite(cooldownMs) || cooldownMs < 0) {
      throw new EdgelimitError(
        "EL_STORE_OPTION",
        `${owner}: breaker.cooldownMs must be 0 or more milliseconds; got ${cooldownMs}`,
      );
    }
    this.failureThreshold = failureThreshold;
    this.cooldownMs = cooldownMs;
    this.#clock = clock;
  }

  get state(): BreakerState {
    return this.#state;
  }

  /** Failures since the last success (0 while the store answers). */
  get consecutiveFailures(): number {
    return this.#consecutiveFailures;
  }

  /** True when a call may go to the server now; a true answer in the open state is the probe. */
  tryAcquire(): boolean {
    if (this.#state === "closed") return true;
    if (this.#state === "open" && this.#clock() - this.#openedAt >= this.cooldownMs) {
      this.#state = "probing";
      return true;
    }
    this.rejected++;
    return false;
  }

  recordSuccess(): void {
    this.#consecutiveFailures = 0;
    this.#state = "closed";
  }

  recordFailure(): void {
    this.#consecutiveFailures++;
    // Calls sent before the circuit opened fail while it is open: the cooldown is not made
    // longer by them, only by a probe's failure.
    if (this.#state === "open") return;
    if (this.#state === "probing" || this.#consecutiveFailures >= this.failureThreshold) {
      this.opened++;
      this.#state = "open";
      this.#openedAt = this.#clock();
    }
  }
}
