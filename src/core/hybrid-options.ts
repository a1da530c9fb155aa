/**
 * `hybridCounting(store, options)` as plain JavaScript may call it, checked before anything is
 * built (see options.ts): the store it wraps and its options.
 */
import type { Scheduler } from "./deadline.js";
import { checkArgument, checkOptions, type OptionsShape, STORE } from "./options.js";

export interface HybridOptions {
  /** Epoch ms, the limiter's clock: when a reset raises its fence (default `Date.now`). */
  readonly clock?: (() => number) | undefined;
  /** The monotonic clock and timers of round trips, leases and resets (default: the runtime's). */
  readonly scheduler?: Scheduler | undefined;
  /** At most how far ahead one reservation covers a subject's rate (default: the rest of its window). */
  readonly reserveMs?: number | undefined;
  /** Subjects whose reservations are held (default 20,000; a forgotten one strands its units). */
  readonly maxKeys?: number | undefined;
  /**
   * How long held units stay spendable after their reservation was sent, where the store can
   * reset counters (default 10,000 ms): what a reset waits for before it takes effect. Shorter
   * leases make resets quicker and cost a busy subject more renewals (about one per three
   * quarters of a lease in each process).
   */
  readonly leaseMs?: number | undefined;
}

const HYBRID_OPTIONS = {
  clock: "function",
  scheduler: "object",
  reserveMs: "number",
  maxKeys: "number",
  leaseMs: "number",
} satisfies OptionsShape<HybridOptions>;

export function checkHybridArguments(store: unknown, options: unknown): void {
  checkArgument("hybridCounting", "the store (first argument)", store, STORE, "EL_STORE_OPTION");
  checkOptions("hybridCounting", options, HYBRID_OPTIONS, { code: "EL_STORE_OPTION" });
}
