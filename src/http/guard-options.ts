/**
 * The guard's options as the run-time check sees them (`core/options.ts`): what every adapter
 * takes (see `GuardOptions`), the limiter it is given, and express-rate-limit's option names,
 * which newcomers bring along, with what to write here instead.
 */
import { isObject, type OptionKind, type OptionsShape } from "../core/options.js";
import type { GuardOptions } from "./guard.js";

/** A limiter (`createLimiter`'s), as the middleware takes it. */
export const LIMITER: OptionKind = {
  describe: "a limiter from createLimiter({ policy, store })",
  test: (value) => isObject(value) && typeof value.decide === "function" && isObject(value.policy),
};

/** A challenge page (`createChallenge(policy)`). */
export const CHALLENGE: OptionKind = {
  describe: "a challenge from createChallenge(policy)",
  test: (value) => isObject(value) && typeof value.handle === "function",
};

/** The options every adapter offers, whatever its runtime's request. */
export const GUARD_OPTIONS = {
  challenge: CHALLENGE,
  skip: "function",
  cost: "function",
  user: "function",
  onRefused: "function",
} as const satisfies OptionsShape<GuardOptions<[], unknown>>;

/**
 * express-rate-limit's options (and hono-rate-limiter's, which copies them), with what to write
 * instead: here the limits are the policy's, and the middleware takes the limiter.
 */
const POLICY_LIMITS =
  "pass the limiter, createLimiter({ policy, store }): its policy says the limits";
export const EXPRESS_RATE_LIMIT_OPTIONS: Readonly<Record<string, string>> = {
  windowMs: `express-rate-limit's \`windowMs\` is a rule's \`window\` here, in the policy ("60s"); ${POLICY_LIMITS}`,
  max: `express-rate-limit's \`max\` is a rule's \`limit\` here, in the policy (tiers.anonymous.global: 100); ${POLICY_LIMITS}`,
  limit: `express-rate-limit's \`limit\` is a rule's \`limit\` here, in the policy (tiers.anonymous.global: 100); ${POLICY_LIMITS}`,
  store: "the store is the limiter's here: createLimiter({ policy, store })",
  keyGenerator:
    "who is counted is the policy's `identity` here (identity.ip, identity.user), or the `user` option for a user your application verified",
  handler: "express-rate-limit's `handler` is `onRefused` here",
  message: "write a refusal your own way with `onRefused`",
  statusCode: "write a refusal your own way with `onRefused`",
  standardHeaders: "the rate-limit headers are the policy's here (headers: { draft, legacy })",
  legacyHeaders: "the rate-limit headers are the policy's here (headers: { draft, legacy })",
};
