/**
 * What one `ShouldRateLimit` call may hold, checked before either decider sees it (gRPC and
 * `POST /json` alike): a call beyond these is refused with `EL_RLS_REQUEST` (gRPC
 * `INVALID_ARGUMENT`, HTTP 400), never decided, so that no call makes the service hold more
 * than a bounded amount for it, and no input reaches the core as a number it would throw on.
 *
 * The defaults stay clear of anything Envoy sends. Envoy refuses a request whose headers
 * together exceed `max_request_headers_kb` (60 KiB by default), and a descriptor's entries come
 * from one request's headers, path and address: a descriptor's keys and values together stay
 * under 64 KiB, so no client behind a default Envoy can make a call refused (which Envoy, with
 * its default `failure_mode_deny: false`, would admit) by sending longer headers; an Envoy whose
 * header limit was raised needs `--max-descriptor-bytes` raised with it. Descriptors and entries
 * come from Envoy's route configuration, never from a client: 64 `rate_limits` on one route, or
 * 16 actions in one, are far more than a route needs.
 */
import { MAX_COST } from "../core/cost.js";
import { EdgelimitError } from "../core/errors.js";
import type { RateLimitDescriptor, RateLimitRequest } from "./messages.js";

export interface RequestLimits {
  /** Descriptors in one call (default 64). */
  readonly maxDescriptors: number;
  /** Entries in one descriptor (default 16). */
  readonly maxEntries: number;
  /** Bytes of one descriptor's keys and values together, in UTF-8 (default 65,536). */
  readonly maxDescriptorBytes: number;
}

export const DEFAULT_REQUEST_LIMITS: RequestLimits = Object.freeze({
  maxDescriptors: 64,
  maxEntries: 16,
  maxDescriptorBytes: 64 * 1024,
});

/** A `uint32`, as `requests_per_unit` is in the protos. */
const MAX_REQUESTS_PER_UNIT = 4_294_967_295;

/** Resolves the limits a caller gave (any left out take their default), refusing bad ones. */
export function requestLimitsOf(
  given: { readonly [Name in keyof RequestLimits]?: number | undefined } | undefined,
): RequestLimits {
  const limits = { ...DEFAULT_REQUEST_LIMITS };
  for (const name of Object.keys(limits) as (keyof RequestLimits)[]) {
    const value = given?.[name] ?? limits[name];
    if (!Number.isInteger(value) || value < 1) {
      throw new EdgelimitError(
        "EL_BAD_OPTION",
        `requestLimits.${name} must be a whole number of at least 1; got ${String(value)}`,
      );
    }
    limits[name] = value;
  }
  return limits;
}

/** Throws `EL_RLS_REQUEST`, naming what to change, for a call beyond the limits. */
export function checkRequestLimits(request: RateLimitRequest, limits: RequestLimits): void {
  const { descriptors } = request;
  if (descriptors.length > limits.maxDescriptors) {
    throw tooManyDescriptors(limits.maxDescriptors, descriptors.length);
  }
  checkHits(request.hitsAddend, "the call's hits_addend");
  descriptors.forEach((descriptor, index) => {
    checkDescriptor(descriptor, index, limits);
  });
}

function checkDescriptor(
  descriptor: RateLimitDescriptor,
  index: number,
  limits: RequestLimits,
): void {
  const where = `descriptors[${index}]`;
  const { entries } = descriptor;
  if (entries.length > limits.maxEntries) {
    throw refused(
      `${where} has ${entries.length} entries; at most ${limits.maxEntries} are read in one descriptor`,
    );
  }
  let bytes = 0;
  for (const { key, value } of entries) {
    bytes += Buffer.byteLength(key, "utf8") + Buffer.byteLength(value, "utf8");
  }
  if (bytes > limits.maxDescriptorBytes) {
    throw refused(
      `${where}'s keys and values take ${bytes} bytes; at most ${limits.maxDescriptorBytes} are read in one descriptor`,
    );
  }
  if (descriptor.hitsAddend !== undefined) checkHits(descriptor.hitsAddend, `${where}.hits_addend`);
  const override = descriptor.limit;
  if (override !== undefined && override.requestsPerUnit > MAX_REQUESTS_PER_UNIT) {
    throw refused(
      `${where}.limit.requests_per_unit is ${override.requestsPerUnit}; it is a uint32 (at most ${MAX_REQUESTS_PER_UNIT})`,
    );
  }
}

/** A call with more descriptors than `max` (`count` when known: a decoder stops counting). */
export function tooManyDescriptors(max: number, count?: number): EdgelimitError {
  const has = count === undefined ? `more than ${max}` : String(count);
  return refused(`the call has ${has} descriptors; at most ${max} are read`);
}

function checkHits(hits: number, what: string): void {
  if (hits > MAX_COST) {
    throw refused(
      `${what} is ${hits}; one call counts at most ${MAX_COST} hits on a descriptor (the largest cost of one request)`,
    );
  }
}

function refused(message: string): EdgelimitError {
  return new EdgelimitError("EL_RLS_REQUEST", `rate limit call refused: ${message}`);
}
