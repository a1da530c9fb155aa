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
