/**
 * The messages of Envoy's rate limit service (`envoy.service.ratelimit.v3`) as plain objects,
 * with only the fields the service reads or writes. Field numbers, enums and wire types are in
 * `codec.ts`; docs/proxies.md says why the codec is written here rather than loaded from the
 * `.proto` files.
 */
import type { WindowSpec } from "../core/types.js";

/** `envoy.extensions.common.ratelimit.v3.RateLimitDescriptor.Entry`. */
export interface DescriptorEntry {
  readonly key: string;
  readonly value: string;
}

/** `RateLimitResponse.RateLimit.Unit`, and the override's `envoy.type.v3.RateLimitUnit` (same numbers). */
export const UNIT = {
  UNKNOWN: 0,
  SECOND: 1,
  MINUTE: 2,
  HOUR: 3,
  DAY: 4,
  MONTH: 5,
  YEAR: 6,
  WEEK: 7,
} as const;

export type UnitName = keyof typeof UNIT;
export type Unit = (typeof UNIT)[UnitName];

/** A unit's length as envoyproxy/ratelimit counts it: a month is 30 days, a year 365. */
export const UNIT_SECONDS: Readonly<Record<Exclude<Unit, 0>, number>> = {
  1: 1,
  2: 60,
  3: 3_600,
  4: 86_400,
  5: 2_592_000,
  6: 31_536_000,
  7: 604_800,
};

/** The unit a window is exactly as long as (60 s is MINUTE); UNKNOWN for any other window. */
export function unitOfWindow(window: WindowSpec): Unit {
  if (!("ms" in window)) return UNIT.UNKNOWN;
  for (const [unit, seconds] of Object.entries(UNIT_SECONDS)) {
    if (seconds * 1000 === window.ms) return Number(unit) as Unit;
  }
  return UNIT.UNKNOWN;
}

/** The limit a request supplies for one descriptor instead of the configured one. */
export interface LimitOverride {
  readonly requestsPerUnit: number;
  readonly unit: number;
}

export interface RateLimitDescriptor {
  readonly entries: readonly DescriptorEntry[];
  readonly limit: LimitOverride | undefined;
  /** The descriptor's own `hits_addend` (0 is a check that counts nothing); undefined when unset. */
  readonly hitsAddend: number | undefined;
}

export interface RateLimitRequest {
  readonly domain: string;
  readonly descriptors: readonly RateLimitDescriptor[];
  /** 0 when unset: each descriptor then counts 1 (or its own `hitsAddend`). */
  readonly hitsAddend: number;
}

export const CODE = { UNKNOWN: 0, OK: 1, OVER_LIMIT: 2 } as const;
export type Code = (typeof CODE)[keyof typeof CODE];

/** `RateLimitResponse.RateLimit`: the limit a descriptor was held to. */
export interface CurrentLimit {
  readonly name: string;
  readonly requestsPerUnit: number;
  readonly unit: number;
}

export interface DescriptorStatus {
  readonly code: Code;
  readonly currentLimit: CurrentLimit | undefined;
  readonly limitRemaining: number;
  /** Milliseconds until the limit resets; undefined when there is no limit. */
  readonly durationUntilResetMs: number | undefined;
}

export interface HeaderValue {
  readonly key: string;
  readonly value: string;
}

export interface RateLimitResponse {
  readonly overallCode: Code;
  readonly statuses: readonly DescriptorStatus[];
  readonly responseHeadersToAdd: readonly HeaderValue[];
  readonly requestHeadersToAdd: readonly HeaderValue[];
}

/** `grpc.health.v1.HealthCheckResponse.ServingStatus`. */
export const SERVING_STATUS = {
  UNKNOWN: 0,
  SERVING: 1,
  NOT_SERVING: 2,
  SERVICE_UNKNOWN: 3,
} as const;
export type ServingStatus = (typeof SERVING_STATUS)[keyof typeof SERVING_STATUS];
