/**
 * The rate limit service's messages on the wire, with the field numbers of Envoy's
 * `envoy/service/ratelimit/v3/rls.proto`, `envoy/extensions/common/ratelimit/v3/ratelimit.proto`,
 * `envoy/config/core/v3/base.proto` (HeaderValue) and gRPC's `grpc/health/v1/health.proto`.
 * test/rls/codec.test.ts checks them against those files, read by protobufjs.
 */
import type {
  DescriptorEntry,
  DescriptorStatus,
  HeaderValue,
  LimitOverride,
  RateLimitDescriptor,
  RateLimitRequest,
  RateLimitResponse,
  ServingStatus,
} from "./messages.js";
import { ProtoReader, ProtoWriter, WIRE } from "./protobuf.js";
import { tooManyDescriptors } from "./request-limits.js";

const NO_ENTRIES: readonly DescriptorEntry[] = Object.freeze([]);

/** A field's tag: its number times 8 plus its wire type. */
function tagOf(field: number, wireType: number): number {
  return field * 8 + wireType;
}

const DOMAIN = tagOf(1, WIRE.LENGTH);
const DESCRIPTOR = tagOf(2, WIRE.LENGTH);
const REQUEST_HITS = tagOf(3, WIRE.VARINT);
const ENTRY = tagOf(1, WIRE.LENGTH);
const OVERRIDE = tagOf(2, WIRE.LENGTH);
const DESCRIPTOR_HITS = tagOf(3, WIRE.LENGTH);
const KEY = tagOf(1, WIRE.LENGTH);
const VALUE = tagOf(2, WIRE.LENGTH);
const FIRST_VARINT = tagOf(1, WIRE.VARINT);
const SECOND_VARINT = tagOf(2, WIRE.VARINT);

/**
 * `maxDescriptors`: a call with more is refused as soon as the one past it is read, so that a
 * message of tens of thousands of descriptors costs no more than the most a call may hold.
 */
export function decodeRateLimitRequest(
  bytes: Uint8Array,
  maxDescriptors = Number.POSITIVE_INFINITY,
): RateLimitRequest {
  const reader = new ProtoReader(bytes);
  let domain = "";
  const descriptors: RateLimitDescriptor[] = [];
  let hitsAddend = 0;
  while (!reader.done) {
    const tag = reader.tag();
    if (tag === DOMAIN) domain = reader.string();
    else if (tag === DESCRIPTOR) {
      if (descriptors.length === maxDescriptors) throw tooManyDescriptors(maxDescriptors);
      descriptors.push(descriptor(reader.message()));
    } else if (tag === REQUEST_HITS) hitsAddend = reader.varint();
    else reader.skip(tag & 7);
  }
  return { domain, descriptors, hitsAddend };
}

function descriptor(reader: ProtoReader): RateLimitDescriptor {
  let entries: DescriptorEntry[] | undefined;
  let limit: LimitOverride | undefined;
  let hitsAddend: number | undefined;
  while (!reader.done) {
    const tag = reader.tag();
    if (tag === ENTRY) {
      entries ??= [];
      entries.push(entry(reader.message()));
    } else if (tag === OVERRIDE) limit = override(reader.message());
    // A google.protobuf.UInt64Value: its presence (even holding 0) is what sets the field.
    else if (tag === DESCRIPTOR_HITS) hitsAddend = wrappedNumber(reader.message());
    else reader.skip(tag & 7);
  }
  return { entries: entries ?? NO_ENTRIES, limit, hitsAddend };
}

function entry(reader: ProtoReader): DescriptorEntry {
  let key = "";
  let value = "";
  while (!reader.done) {
    const tag = reader.tag();
    if (tag === KEY) key = reader.string();
    else if (tag === VALUE) value = reader.string();
    else reader.skip(tag & 7);
  }
  return { key, value };
}

function override(reader: ProtoReader): LimitOverride {
  let requestsPerUnit = 0;
  let unit = 0;
  while (!reader.done) {
    const tag = reader.tag();
    if (tag === FIRST_VARINT) requestsPerUnit = reader.varint();
    else if (tag === SECOND_VARINT) unit = reader.varint();
    else reader.skip(tag & 7);
  }
  return { requestsPerUnit, unit };
}

function wrappedNumber(reader: ProtoReader): number {
  let value = 0;
  while (!reader.done) {
    const tag = reader.tag();
    if (tag === FIRST_VARINT) value = reader.varint();
    else reader.skip(tag & 7);
  }
  return value;
}

/** proto3 leaves fields at their default (0, "") out of the message; so does this. */
export function encodeRateLimitResponse(response: RateLimitResponse): Buffer {
  const writer = new ProtoWriter();
  if (response.overallCode !== 0) writer.varintField(1, response.overallCode);
  for (const status of response.statuses) writer.bytesField(2, descriptorStatus(status));
  for (const header of response.responseHeadersToAdd) writer.bytesField(3, headerValue(header));
  for (const header of response.requestHeadersToAdd) writer.bytesField(4, headerValue(header));
  return writer.finish();
}

function descriptorStatus(status: DescriptorStatus): Buffer {
  const writer = new ProtoWriter();
  if (status.code !== 0) writer.varintField(1, status.code);
  const limit = status.currentLimit;
  if (limit !== undefined) {
    const limitWriter = new ProtoWriter();
    if (limit.requestsPerUnit !== 0) limitWriter.varintField(1, limit.requestsPerUnit);
    if (limit.unit !== 0) limitWriter.varintField(2, limit.unit);
    if (limit.name !== "") limitWriter.stringField(3, limit.name);
    writer.bytesField(2, limitWriter.finish());
  }
  if (status.limitRemaining !== 0) writer.varintField(3, status.limitRemaining);
  const resetMs = status.durationUntilResetMs;
  if (resetMs !== undefined) {
    // google.protobuf.Duration: seconds (int64) and nanos (int32).
    const duration = new ProtoWriter();
    const whole = Math.max(0, Math.floor(resetMs / 1000));
    const nanos = Math.max(0, Math.round((resetMs - whole * 1000) * 1_000_000));
    if (whole !== 0) duration.varintField(1, whole);
    if (nanos !== 0) duration.varintField(2, nanos);
    writer.bytesField(4, duration.finish());
  }
  return writer.finish();
}

function headerValue(header: HeaderValue): Buffer {
  return new ProtoWriter().stringField(1, header.key).stringField(2, header.value).finish();
}

/** `grpc.health.v1.HealthCheckRequest`: the service asked about ("" for the whole server). */
export function decodeHealthCheckRequest(bytes: Uint8Array): { readonly service: string } {
  const reader = new ProtoReader(bytes);
  let service = "";
  while (!reader.done) {
    const tag = reader.tag();
    if (tag === KEY) service = reader.string();
    else reader.skip(tag & 7);
  }
  return { service };
}

export function encodeHealthCheckResponse(status: ServingStatus): Buffer {
  const writer = new ProtoWriter();
  if (status !== 0) writer.varintField(1, status);
  return writer.finish();
}
