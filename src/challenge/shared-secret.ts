import { EdgelimitError } from "../core/errors.js";
import type { ResolvedPolicy } from "../policy/types.js";

/** Whether any enforcing rule of the policy sends clients to the challenge. */
export function challenges(policy: ResolvedPolicy): boolean {
  return policy.rules.some((rule) => rule.action === "challenge" && !rule.shadow);
}

/**
 * Refuses a challenging policy without `challenge.secret` where several instances answer the
 * same clients (Lambda@Edge, several gateway processes): without a shared key each instance
 * signs challenges and passes with its own random one, and a challenge page served by one
 * instance is refused (403) by the next.
 */
export function requireSharedChallengeSecret(policy: ResolvedPolicy, instances: string): void {
  if (!challenges(policy) || policy.challenge.secret !== undefined) return;
  const message = `challenge.secret is not set, and ${instances}: each would sign challenges and passes with its own random key, so a challenge solved on one is refused (403) by another. Set challenge.secret to a secret every instance shares, for example challenge: { secret: { env: EDGELIMIT_CHALLENGE_SECRET } }, and export EDGELIMIT_CHALLENGE_SECRET=...`;
  throw new EdgelimitError("EL_POLICY_SECRET_MISSING", message, [
    {
      path: "challenge.secret",
      message: "required when the policy challenges",
      code: "EL_POLICY_SECRET_MISSING",
    },
  ]);
}
