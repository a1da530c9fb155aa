/** Checks shared by the middleware of every runtime (no runtime imports: edge bundles use it). */
import { EdgelimitError } from "../core/errors.js";
import type { Limiter } from "../limiter.js";

/** A `user` option the policy does not allow would be ignored: say so when it is set up. */
export function refuseUnallowedUser(name: string, limiter: Limiter, given: boolean): void {
  if (!given || limiter.policy.identity.application === true) return;
  throw new EdgelimitError(
    "EL_BAD_ARGUMENT",
    `${name}: the user option counts requests as the users your application verified, which the policy does not allow; set identity.user.application: true in the policy`,
  );
}

/** A cost a middleware's `cost` option returned: a whole number of units, at least 1. */
export function validCost(name: string, cost: number): number {
  if (!Number.isInteger(cost) || cost < 1) {
    throw new EdgelimitError(
      "EL_BAD_ARGUMENT",
      `${name}: cost() must return a whole number of at least 1 (or undefined for the rules' own); got ${cost}`,
    );
  }
  return cost;
}
