import type { Logger } from "pino";
import { causeOf, RateLimitedWarning } from "../warnings.js";

/** How long after a store failure `/healthz` still says `degraded`. */
const STORE_DEGRADED_MS = 30_000;

export interface StoreHealth {
  readonly name: string;
  readonly state: "ok" | "degraded";
  /** Decisions the store failed since start. */
  readonly failures: number;
  readonly lastError: string | undefined;
  readonly lastErrorAt: string | undefined;
}

/**
 * The gateway's view of its store: every failed decision is counted, its cause kept, and logged
 * at most once every 10 s; `/healthz` says `degraded` while the last failure is recent.
 */
export class StoreHealthTracker {
  readonly #name: string;
  readonly #clock: () => number;
  readonly #warning: RateLimitedWarning;
  #failures = 0;
  #lastError: string | undefined;
  #lastAt: number | undefined;

  constructor(name: string, logger: Logger, clock: () => number) {
    this.#name = name;
    this.#clock = clock;
    this.#warning = new RateLimitedWarning((cause, suppressed) =>
      logger.warn({
        msg: "the store failed a decision; the rule's fail mode applied",
        cause,
        moreSinceLastWarning: suppressed,
      }),
    );
  }

  failed(error: unknown): void {
    const cause = causeOf(error);
    this.#failures++;
    this.#lastError = cause;
    this.#lastAt = this.#clock();
    this.#warning.warn(cause);
  }

  health(): StoreHealth {
    const lastAt = this.#lastAt;
    return {
      name: this.#name,
      state: lastAt !== undefined && this.#clock() - lastAt < STORE_DEGRADED_MS ? "degraded" : "ok",
      failures: this.#failures,
      lastError: this.#lastError,
      lastErrorAt: lastAt === undefined ? undefined : new Date(lastAt).toISOString(),
    };
  }
}
