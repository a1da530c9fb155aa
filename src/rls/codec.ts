/**
 * The rate limit service's messages on the wire, with the field numbers of Envoy's
 * `envoy/service/ratelimit/v3/rls.proto`, `envoy/extensions/common/ratelimit/v3/ratelimit.proto`,
 * `envoy/config/core/v3/base.proto` (HeaderValue) and gRPC's `grpc/health/v1/health.proto`.
 * test/rls/codec.test.ts checks them against those files, read by protobufjs.
 */
import type {
  CurrentLimit,
  DescriptorEntry,
  DescriptorStatus,
  HeaderValue,
  LimitOverride,
  RateLimitDescriptor,
  RateLimitRequest,
  RateLimitResponse,
  ServingStatus,
} from "./messages.js";
import { lengthFieldSize, ProtoReader, ProtoWriter, varintSize, WIRE } from "./protobuf.js";
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
      descriptors.push(descriptor(reader));
    } else if (tag === REQUEST_HITS) hitsAddend = reader.varint();
    else reader.skip(tag & 7);
  }
  return { domain, descriptors, hitsAddend };
}

/** The descriptor whose field the reader is at. */
function descriptor(reader: ProtoReader): RateLimitDescriptor {
  const outer = reader.enter();
  let entries: DescriptorEntry[] | undefined;
  let limit: LimitOverride | undefined;
  let hitsAddend: number | undefined;
  while (!reader.done) {
    const tag = reader.tag();
    if (tag === ENTRY) {
      entries ??= [];
      entries.push(entry(reader));
    } else if (tag === OVERRIDE) limit = override(reader);
    // A google.protobuf.UInt64Value: its presence (even holding 0) is what sets the field.
    else if (tag === DESCRIPTOR_HITS) hitsAddend = wrappedNumber(reader);
    else reader.skip(tag & 7);
  }
  reader.leave(outer);
  return { entries: entries ?? NO_ENTRIES, limit, hitsAddend };
}

function entry(reader: ProtoReader): DescriptorEntry {
  const outer = reader.enter();
  let key = "";
  let value = "";
  while (!reader.done) {
    const tag = reader.tag();
    if (tag === KEY) key = reader.string();
    else if (tag === VALUE) value = reader.string();
    else reader.skip(tag & 7);
  }
  reader.leave(outer);
  return { key, value };
}

function override(reader: ProtoReader): LimitOverride {
  const outer = reader.enter();
  let requestsPerUnit = 0;
  let unit = 0;
  while (!reader.done) {
    const tag = reader.tag();
    if (tag === FIRST_VARINT) requestsPerUnit = reader.varint();
    else if (tag === SECOND_VARINT) unit = reader.varint();
    else reader.skip(tag & 7);
  }
  reader.leave(outer);
  return { requestsPerUnit, unit };
}

function wrappedNumber(reader: ProtoReader): number {
  const outer = reader.enter();
  let value = 0;
  while (!reader.done) {
    const tag = reader.tag();
    if (tag === FIRST_VARINT) value = reader.varint();
    else reader.skip(tag & 7);
  }
  reader.leave(outer);
  return value;
}

/**
 * proto3 leaves fields at their default (0, "") out of the message; so does this. Sizes are
 * worked out first and the message written once into a buffer of that size, after `prefix`
 * bytes left for the caller (grpc.ts puts gRPC's message prefix there).
 */
export function encodeRateLimitResponse(response: RateLimitResponse, prefix = 0): Buffer {
  let size = response.overallCode === 0 ? 0 : 1 + varintSize(response.overallCode);
  for (const status of response.statuses) size += lengthFieldSize(descriptorStatusSize(status));
  for (const header of response.responseHeadersToAdd) size += lengthFieldSize(headerSize(header));
  for (const header of response.requestHeadersToAdd) size += lengthFieldSize(headerSize(header));
  const writer = new ProtoWriter(size, prefix);
  if (response.overallCode !== 0) writer.varintField(1, response.overallCode);
  for (const status of response.statuses) writeDescriptorStatus(writer, status);
  for (const header of response.responseHeadersToAdd) writeHeader(writer, 3, header);
  for (const header of response.requestHeadersToAdd) writeHeader(writer, 4, header);
  return writer.finish();
}

function varintFieldSize(value: number): number {
  return value === 0 ? 0 : 1 + varintSize(value);
}

function currentLimitSize(limit: CurrentLimit): number {
  return (
    varintFieldSize(limit.requestsPerUnit) +
    varintFieldSize(limit.unit) +
    (limit.name === "" ? 0 : lengthFieldSize(Buffer.byteLength(limit.name, "utf8")))
  );
}

/** google.protobuf.Duration: seconds (int64) and nanos (int32). */
function durationOf(resetMs: number): { readonly seconds: number; readonly nanos: number } {
  const seconds = Math.max(0, Math.floor(resetMs / 1000));
  return { seconds, nanos: Math.max(0, Math.round((resetMs - seconds * 1000) * 1_000_000)) };
}

function durationSize(resetMs: number): number {
  const { seconds, nanos } = durationOf(resetMs);
  return varintFieldSize(seconds) + varintFieldSize(nanos);
}

function descriptorStatusSize(status: DescriptorStatus): number {
  const limit = status.currentLimit;
  const resetMs = status.durationUntilResetMs;
  return (
    varintFieldSize(status.code) +
    (limit === undefined ? 0 : lengthFieldSize(currentLimitSize(limit))) +
    varintFieldSize(status.limitRemaining) +
    (resetMs === undefined ? 0 : lengthFieldSize(durationSize(resetMs)))
  );
}

function writeDescriptorStatus(writer: ProtoWriter, status: DescriptorStatus): void {
  writer.lengthField(2, descriptorStatusSize(status));
  if (status.code !== 0) writer.varintField(1, status.code);
  const limit = status.currentLimit;
  if (limit !== undefined) {
    writer.lengthField(2, currentLimitSize(limit));
    if (limit.requestsPerUnit !== 0) writer.varintField(1, limit.requestsPerUnit);
    if (limit.unit !== 0) writer.varintField(2, limit.unit);
    if (limit.name !== "") writer.stringField(3, limit.name, Buffer.byteLength(limit.name, "utf8"));
  }
  if (status.limitRemaining !== 0) writer.varintField(3, status.limitRemaining);
  const resetMs = status.durationUntilResetMs;
  if (resetMs !== undefined) {
    const { seconds, nanos } = durationOf(resetMs);
    writer.lengthField(4, durationSize(resetMs));
    if (seconds !== 0) writer.varintField(1, seconds);
    if (nanos !== 0) writer.varintField(2, nanos);
  }
}

function headerSize(header: HeaderValue): number {
  return (
    lengthFieldSize(Buffer.byteLength(header.key, "utf8")) +
    lengthFieldSize(Buffer.byteLength(header.value, "utf8"))
  );
}

function writeHeader(writer: ProtoWriter, field: number, header: HeaderValue): void {
  writer.lengthField(field, headerSize(header));
  writer.stringField(1, header.key, Buffer.byteLength(header.key, "utf8"));
  writer.stringField(2, header.value, Buffer.byteLength(header.value, "utf8"));
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

export function encodeHealthCheckResponse(status: ServingStatus, prefix = 0): Buffer {
  const writer = new ProtoWriter(varintFieldSize(status), prefix);
  if (status !== 0) writer.varintField(1, status);
  return writer.finish();
}
