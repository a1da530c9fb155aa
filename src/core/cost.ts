import { EdgelimitError } from "./errors.js";

/**
 * The largest cost one request may have. Costs are whole units: counts stay exact in every
 * store (Redis prints numbers with 14 significant digits, DynamoDB and JavaScript hold them as
 * doubles), and a cost of `1e300` or `NaN` can never poison a counter for its window.
 */
export const MAX_COST = 1_000_000_000;

/**
 * Refuses a cost that is not a whole number from 1 to `MAX_COST`, whatever the entry point
 * (`limiter.check`, a middleware's `cost` option, the gateway). A negative cost would admit
 * beyond the limit; `NaN` or a huge one would block the subject for the rest of the window.
 */
export function checkCost(cost: number | undefined, what = "a request's cost", least = 1): void {
  if (cost === undefined) return;
  if (typeof cost === "number" && Number.isInteger(cost) && cost >= least && cost <= MAX_COST) {
    return;
  }
  throw new EdgelimitError(
    "EL_BAD_COST",
    `${what} must be a whole number from ${least} to ${MAX_COST} (or undefined for the rules' own); got ${String(cost)}`,
  );
}
