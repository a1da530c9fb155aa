/**
 * `edgelimit/cloudflare`: the policy on Cloudflare Workers, with the native `ratelimits` binding
 * as the cheap approximate filter and a Durable Object (`EdgelimitCounter`) as the exact counter.
 * Export `EdgelimitCounter` from the Worker's main module so that wrangler can bind it.
 */

export type { AreaOptions } from "./areas.js";
export type {
  DurableObjectNamespaceLike,
  DurableObjectStateLike,
  ExecutionContextLike,
  RateLimitBinding,
  WorkerEnv,
} from "./bindings.js";
export {
  approximateRules,
  BINDING_PERIODS_SECONDS,
  backendOf,
  bindingNameFor,
  checkCloudflarePolicy,
} from "./check.js";
export { EdgelimitCounter } from "./counter-object.js";
export {
  assertCloudflarePolicy,
  CloudflareLimiter,
  type CloudflareLimiterOptions,
  cloudflareLimiter,
  createCloudflareHandler,
  DEFAULT_COUNTER_BINDING,
  rateLimitMiddleware,
  type WorkerFetch,
} from "./handler.js";
export { bindingKey } from "./rate-limit-binding.js";
export {
  CloudflareStore,
  type CloudflareStoreOptions,
  cloudflareStore,
} from "./store.js";
