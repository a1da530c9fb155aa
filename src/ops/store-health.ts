import type { Logger } from "pino";
import type { LocalCountingStatus } from "../core/local-fallback.js";
import type { StoreStatus } from "../core/types.js";
import { causeOf, RateLimitedWarning } from "../warnings.js";

/** How long after a store failure (or a local count) `/healthz` still says `degraded`. */
const STORE_DEGRADED_MS = 30_000;

export interface StoreHealth {
  readonly name: string;
  readonly state: "ok" | "degraded";
  /** Decisions the store failed since start. */
  readonly failures: number;
  readonly lastError: string | undefined;
  readonly lastErrorAt: string | undefined;
  /**
   * The store's own view of its calls (circuit breaker, connection), for remote stores: `open`
   * means decisions do not wait for it at all.
   */
  readonly calls: StoreStatus | undefined;
  /** `failMode: local` rules counted in this process while the store was failed. */
  readonly local: {
    /** A decision was counted locally within the last 30 s. */
    readonly counting: boolean;
    readonly decisions: number;
    readonly lastAt: string | undefined;
    /** Counters with admissions still owed to the store (paid with their next call). */
    readonly owedKeys: number;
  };
}

/** Where the tracker reads what it reports besides the failures it is told of. */
export interface StoreHealthSources {
  readonly status: () => StoreStatus | undefined;
  readonly local: () => LocalCountingStatus;
}

/**
 * A server's view of its store: every failed decision is counted, its cause kept, and logged
 * at most once every 10 s; `/healthz` says `degraded` while the last failure is recent or the
 * store's circuit breaker is open, and shows the store's own view of its calls and what is
 * counted locally meanwhile.
 */
export class StoreHealthTracker {
  readonly #name: string;
  readonly #clock: () => number;
  readonly #warning: RateLimitedWarning;
  readonly #sources: StoreHealthSources;
  #failures = 0;
  #lastError: string | undefined;
  #lastAt: number | undefined;

  constructor(name: string, logger: Logger, clock: () => number, sources: StoreHealthSources) {
    this.#name = name;
    this.#clock = clock;
    this.#sources = sources;
    this.#warning = new RateLimitedWarning((cause, suppressed) =>
      logger.warn({
        msg: "the store failed a decision; the rules' fail modes applied (local, open or closed)",
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
    const now = this.#clock();
    const lastAt = this.#lastAt;
    const local = this.#sources.local();
    const calls = this.#sources.status();
    const recent = (at: number | undefined) => at !== undefined && now - at < STORE_DEGRADED_MS;
    return {
      name: this.#name,
      state: recent(lastAt) || calls?.state === "open" ? "degraded" : "ok",
      failures: this.#failures,
      lastError: this.#lastError,
      lastErrorAt: lastAt === undefined ? undefined : new Date(lastAt).toISOString(),
      calls,
      local: {
        counting: recent(local.lastAt),
        decisions: local.decisions,
        lastAt: local.lastAt === undefined ? undefined : new Date(local.lastAt).toISOString(),
        owedKeys: local.owedKeys,
      },
    };
  }
}
