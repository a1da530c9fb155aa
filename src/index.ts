/**
 * `edgelimit`: the limiter, its policy, the memory store, hybrid counting and the types a
 * store or an adapter is written against. Everything here is a semver promise, listed name by
 * name; what is not exported is internal. Runtimes have their own entry points
 * (`edgelimit/node`, `edgelimit/fetch`, `edgelimit/lambda-edge`, `edgelimit/cloudflare`) and so
 * do the remote stores (`edgelimit/redis`, `edgelimit/dynamodb`).
 */

export {
  ALGORITHMS,
  type Algorithm,
  type AppliedCounters,
  applyCounters,
  type CounterRule,
  type CounterStates,
} from "./core/algorithms/index.js";
export { MAX_COST } from "./core/cost.js";
export type { Scheduler } from "./core/deadline.js";
export type { Decision } from "./core/decision.js";
export type { AddressList, EngineCompanions } from "./core/engine.js";
export { EdgelimitError, type ErrorCode, type PolicyIssue } from "./core/errors.js";
export { type HybridOptions, hybridCounting } from "./core/hybrid-counting.js";
export type { TokenVerifier, VerifiedUser } from "./core/identify.js";
export type { ResolvedPolicy, ResolvedRule } from "./core/model.js";
export type { Peek, PeekedRule } from "./core/peek.js";
export {
  createRateLimit,
  type RateLimit,
  type RateLimitOptions,
  type RateLimitReason,
  type RateLimitResult,
} from "./core/rate-limit.js";
export { RESET_CHECK_MS, type ReadResets, ResetWatch } from "./core/reset-watch.js";
export type { SecretContext } from "./core/secrets.js";
export type {
  Action,
  AlgorithmName,
  ChallengeClient,
  ChallengeHandler,
  CounterSpec,
  CounterState,
  ForgetsBlocks,
  PassVerifier,
  Reason,
  RequestDescription,
  ResetFollower,
  ResetsSince,
  RuleOutcome,
  Store,
  StoreCallProgress,
  StoreStatus,
  StoreTraits,
  Tier,
  WindowSpec,
} from "./core/types.js";
export { LATE_GRACE_MS } from "./core/windows.js";
export type { Verdict } from "./http/respond.js";
export {
  createLimiter,
  Limiter,
  type LimiterCompanions,
  type LimiterOptions,
} from "./limiter.js";
export type { Duration, WindowDuration } from "./policy/input-types.js";
export { definePolicy, formatIssue, loadPolicy, parsePolicy } from "./policy/load.js";
export type { PolicyInput } from "./policy/schema.js";
export { MemoryStore, type MemoryStoreOptions, memoryStore } from "./stores/memory.js";
