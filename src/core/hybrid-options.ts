/**
 * `hybridCounting(store, options)` as plain JavaScript may call it, checked before anything is
 * built (see options.ts): the store it wraps and its options.
 */
import type { HybridOptions } from "./hybrid-counting.js";
import { checkArgument, checkOptions, type OptionsShape, STORE } from "./options.js";

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
