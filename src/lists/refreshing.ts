import type { Address } from "../core/ip.js";
import { type CidrSet, parseIp } from "../core/ip.js";
import type { AddressList } from "../limiter.js";

export interface ListStats {
  readonly name: string;
  readonly kind: "allow" | "deny";
  /** Entries (addresses and ranges) in the list in use. */
  readonly size: number;
  /** Epoch ms of the last successful load. */
  readonly lastRefreshAt?: number;
  /** Failed loads since start. */
  readonly errors: number;
  readonly lastError?: string;
}

/** Where a list comes from. `load` resolves to the whole list or rejects; it never half-loads. */
export interface ListSource {
  /** For messages: `file ./allow.txt`, `s3://bucket/key`. */
  readonly description: string;
  load(): Promise<CidrSet>;
  /** Calls `onChange` when the source says it changed (a watched file); returns a stop function. */
  watch?(onChange: () => void): () => void;
}

export interface RefreshingListOptions {
  readonly name: string;
  readonly kind: "allow" | "deny";
  readonly source: ListSource;
  /** Seed: 5 minutes. */
  readonly refreshMs: number;
  readonly clock?: () => number;
  /**
   * `interval` (default where timers keep running: servers): reload on a timer.
   * `on-access`: reload in the background when `has` finds the list older than `refreshMs`,
   * for runtimes that freeze between requests (Lambda@Edge, Workers).
   */
  readonly mode?: "interval" | "on-access";
  /** Called with each failed load (logging); must not throw. */
  readonly onError?: (error: unknown, stats: ListStats) => void;
}

export interface RefreshingList extends AddressList {
  has(address: Address | string | undefined): boolean;
  stats(): ListStats;
  /** Loads now; resolves when done (a failure keeps the last good list and is counted). */
  refresh(): Promise<void>;
  /** The first load (resolves even if it failed: the list is then empty until one succeeds). */
  readonly ready: Promise<void>;
  close(): void;
}

const EMPTY_SIZE = 0;

/**
 * A list that reloads from its source and keeps the last good copy when a load fails, so a
 * source outage never empties a deny list (or an allow list) in the middle of an attack.
 */
export function refreshingList(options: RefreshingListOptions): RefreshingList {
  const clock = options.clock ?? Date.now;
  let current: CidrSet | undefined;
  let lastRefreshAt: number | undefined;
  let lastAttemptAt = Number.NEGATIVE_INFINITY;
  let errors = 0;
  let lastError: string | undefined;
  let inFlight: Promise<void> | undefined;
  let closed = false;

  const stats = (): ListStats => ({
    name: options.name,
    kind: options.kind,
    size: current?.size ?? EMPTY_SIZE,
    ...(lastRefreshAt === undefined ? {} : { lastRefreshAt }),
    errors,
    ...(lastError === undefined ? {} : { lastError }),
  });

  const refresh = (): Promise<void> => {
    if (inFlight !== undefined) return inFlight;
    lastAttemptAt = clock();
    inFlight = options.source
      .load()
      .then(
        (loaded) => {
          if (closed) return;
          current = loaded;
          lastRefreshAt = clock();
        },
        (error: unknown) => {
          errors++;
          lastError = `${options.source.description}: ${error instanceof Error ? error.message : String(error)}`;
          try {
            options.onError?.(error, stats());
          } catch {
            // A logger's failure must not turn into a list failure.
          }
        },
      )
      .finally(() => {
        inFlight = undefined;
      });
    return inFlight;
  };

  const mode = options.mode ?? "interval";
  let timer: ReturnType<typeof setInterval> | undefined;
  if (mode === "interval") {
    timer = setInterval(() => void refresh(), options.refreshMs);
    (timer as { unref?: () => void }).unref?.();
  }
  const stopWatching = options.source.watch?.(() => void refresh());
  const ready = refresh();

  return {
    ready,
    refresh,
    stats,
    has(address) {
      if (
        mode === "on-access" &&
        inFlight === undefined &&
        clock() - lastAttemptAt >= options.refreshMs
      ) {
        void refresh();
      }
      if (current === undefined || current.size === 0) return false;
      const parsed = typeof address === "string" ? parseIp(address) : address;
      return current.has(parsed);
    },
    close() {
      closed = true;
      if (timer !== undefined) clearInterval(timer);
      stopWatching?.();
    },
  };
}
