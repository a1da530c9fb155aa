export {
  ALGORITHMS,
  type Algorithm,
  type CounterRule,
  fixedWindow,
  slidingWindow,
  tokenBucket,
} from "./core/algorithms/index.js";
export { BlockCache } from "./core/block-cache.js";
export { IpResolver } from "./core/client-address.js";
export type { Decision } from "./core/decision.js";
export { formatWindow, parseDurationMs, parseWindow } from "./core/duration.js";
export { EdgelimitError, type ErrorCode, type PolicyIssue } from "./core/errors.js";
export type { TokenVerifier, VerifiedUser } from "./core/identify.js";
export { CidrSet, ipSubject, parseCidr, parseIp } from "./core/ip.js";
export { counterKey, escapeKeyPart, subjectKey } from "./core/keys.js";
export { matchesPrefix, normalizePath } from "./core/path.js";
export {
  createRateLimit,
  type RateLimit,
  type RateLimitOptions,
  type RateLimitResult,
} from "./core/rate-limit.js";
export { readHeader } from "./core/request-headers.js";
export type { SecretContext } from "./core/secrets.js";
export type * from "./core/types.js";
export { windowAt, windowEndOf, windowLengthMs } from "./core/windows.js";
export { rateLimitHeaders } from "./http/headers.js";
export { challengeLocation, type Verdict } from "./http/respond.js";
export {
  type AddressList,
  createLimiter,
  Limiter,
  type LimiterCompanions,
  type LimiterOptions,
} from "./limiter.js";
export { definePolicy, formatIssue, loadPolicy, parsePolicy } from "./policy/load.js";
export type { PolicyInput } from "./policy/schema.js";
export type * from "./policy/types.js";
export { MemoryStore, type MemoryStoreOptions, memoryStore } from "./stores/memory.js";
export { JwtVerifier } from "./tokens/jwt.js";
