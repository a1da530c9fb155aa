import { EdgelimitError } from "../../core/errors.js";
import { positiveMs } from "../../core/options.js";
import type { StoreCallProgress } from "../../core/types.js";
import { CircuitBreaker, type CircuitBreakerOptions, monotonicNow } from "./breaker.js";
import { answeredInTime } from "./call-timeout.js";

export interface RemoteGuardOptions {
  /** Names the server in messages and on health pages (`redis`, `10.0.0.3:6379`). */
  readonly name: string;
  /** Names the store in option errors (`redisStore`). */
  readonly owner: string;
  /** Circuit breaker settings, or `false` for none. */
  readonly breaker?: CircuitBreakerOptions | false | undefined;
  /** Monotonic milliseconds for the breaker (default `performance.now`). */
  readonly clock?: (() => number) | undefined;
  /**
   * Asked before the call that probes an open circuit: resolves once the server answers
   * (Redis: PING). While it fails, the circuit stays open and the call is never sent, so a
   * server that is only stopped never receives a request it would apply long after the
   * decision gave up on it.
   */
  readonly probe?: (() => Promise<unknown>) | undefined;
  /** Bounds every call (and the probe) when the store does not bound its own (default: none). */
  readonly timeoutMs?: number | undefined;
  /**
   * Whether an error is the server refusing this call's data (Redis: an error reply to the
   * script) rather than the server failing. Such a call fails, but the server answered: it does
   * not count toward opening the breaker, so that one rule whose calls the server refuses sends
   * no other rule to its fail mode. Health pages still count and show it.
   */
  readonly refusal?: ((error: unknown) => boolean) | undefined;
}

/**
 * One remote endpoint's calls: refused at once while its circuit breaker is open, probed
 * before they go out again, bounded in time where the store asks, and counted for health pages.
 * The Redis store has one per node, the DynamoDB client one per endpoint, the Cloudflare store
 * one per counter object.
 */
export class RemoteGuard {
  readonly name: string;
  readonly breaker: CircuitBreaker | undefined;
  readonly #probe: (() => Promise<unknown>) | undefined;
  readonly #timeoutMs: number | undefined;
  readonly #refusal: ((error: unknown) => boolean) | undefined;
  /** Failures since the last success, for a guard without a breaker. */
  #consecutiveFailures = 0;
  /** Calls that failed since start. */
  failures = 0;
  lastError: string | undefined;
  /** Epoch milliseconds (for people reading health pages, not for any decision). */
  lastErrorAt: number | undefined;

  constructor(options: RemoteGuardOptions) {
    this.name = options.name;
    this.breaker =
      options.breaker === false
        ? undefined
        : new CircuitBreaker(options.breaker, options.clock ?? monotonicNow, options.owner);
    this.#probe = options.probe;
    this.#refusal = options.refusal;
    this.#timeoutMs =
      options.timeoutMs === undefined
        ? undefined
        : positiveMs(options.timeoutMs, options.owner, "timeoutMs");
  }

  /**
   * True while no call failed since the last success. A call reports a connection's setup to
   * the decision budget (`StoreCallProgress.connecting`) only then: once a failure has been
   * seen, setting up yet another connection is not a cold start but the same failure, and waits
   * no longer than the budget.
   */
  get healthy(): boolean {
    return (this.breaker?.consecutiveFailures ?? this.#consecutiveFailures) === 0;
  }

  /** `closed`, `open` or `probing`; `off` without a breaker. */
  get breakerState(): "closed" | "open" | "probing" | "off" {
    return this.breaker?.state ?? "off";
  }

  /**
   * Runs one call to the server: refused at once (`EL_STORE_FAILED`) while the circuit is open,
   * preceded by the probe when it is the call that probes, and recorded as a success or a
   * failure. `call` receives `progress` while the guard is healthy (see `healthy`). A call whose
   * decision stopped waiting during the probe is not sent (`StoreCallProgress.abandoned`): the
   * probe's success closes the circuit, and the call fails without reaching the server. Errors
   * that are not an `EdgelimitError` come out as `EL_STORE_FAILED`.
   */
  async run<T>(
    call: (progress: StoreCallProgress | undefined) => Promise<T>,
    progress?: StoreCallProgress,
  ): Promise<T> {
    const breaker = this.breaker;
    if (breaker !== undefined && !breaker.tryAcquire()) {
      throw new EdgelimitError(
        "EL_STORE_FAILED",
        `${this.name} circuit breaker is open after repeated failures; retrying shortly`,
      );
    }
    const setup = this.healthy ? progress : undefined;
    try {
      if (breaker?.state === "probing" && this.#probe !== undefined) {
        await this.#bounded(this.#probe());
        if (progress?.abandoned === true) {
          this.succeeded();
          throw new Abandoned(this.name);
        }
      }
      const answer = await this.#bounded(call(setup));
      this.succeeded();
      return answer;
    } catch (error) {
      if (error instanceof Abandoned) throw error;
      if (this.#refusal?.(error) === true) this.refused(error);
      else this.failed(error);
      if (error instanceof EdgelimitError) throw error;
      throw new EdgelimitError(
        "EL_STORE_FAILED",
        `${this.name} failed: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
  }

  succeeded(): void {
    this.#consecutiveFailures = 0;
    this.breaker?.recordSuccess();
  }

  failed(error: unknown): void {
    this.#consecutiveFailures++;
    this.#record(error);
    this.breaker?.recordFailure();
  }

  /** The server answered by refusing the call (see `refusal`): it is up, the call failed. */
  refused(error: unknown): void {
    this.succeeded();
    this.#record(error);
  }

  #record(error: unknown): void {
    this.failures++;
    this.lastError = error instanceof Error ? error.message : String(error);
    this.lastErrorAt = Date.now();
  }

  #bounded<T>(call: Promise<T>): Promise<T> {
    return this.#timeoutMs === undefined ? call : answeredInTime(call, this.#timeoutMs, this.name);
  }
}

/** The probe answered after the decision had stopped waiting: the call was never sent. */
class Abandoned extends EdgelimitError {
  constructor(name: string) {
    super("EL_STORE_FAILED", `${name} answered its probe after the decision had given up`);
  }
}
