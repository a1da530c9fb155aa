/**
 * `POST /json`: a `RateLimitRequest` and its response in protobuf's JSON mapping, as
 * envoyproxy/ratelimit reads and writes them (Go's protojson): field names in lowerCamelCase
 * (the proto names are accepted too), enums by name (or number), `uint64` wrappers as numbers or
 * strings, durations as `"12.5s"`, fields at their default left out, unknown fields refused.
 */
import { EdgelimitError } from "../core/errors.js";
import {
  CODE,
  type DescriptorEntry,
  type DescriptorStatus,
  type LimitOverride,
  type RateLimitDescriptor,
  type RateLimitRequest,
  type RateLimitResponse,
  UNIT,
} from "./messages.js";

type Json = Record<string, unknown>;

export function requestFromJson(text: string): RateLimitRequest {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw invalid(`the body is not JSON: ${(error as Error).message}`);
  }
  const body = object(parsed, "the request");
  fieldsOnly(body, "the request", ["domain", "descriptors", "hitsAddend", "hits_addend"]);
  return {
    domain: stringOf(body.domain, "domain"),
    descriptors: list(body.descriptors, "descriptors").map((item, index) =>
      descriptorFromJson(item, `descriptors[${index}]`),
    ),
    hitsAddend: number(field(body, "hitsAddend", "hits_addend"), "hitsAddend") ?? 0,
  };
}

function descriptorFromJson(value: unknown, path: string): RateLimitDescriptor {
  const body = object(value, path);
  fieldsOnly(body, path, ["entries", "limit", "hitsAddend", "hits_addend"]);
  const entries: DescriptorEntry[] = list(body.entries, `${path}.entries`).map((item, index) => {
    const entryPath = `${path}.entries[${index}]`;
    const entry = object(item, entryPath);
    fieldsOnly(entry, entryPath, ["key", "value"]);
    return {
      key: stringOf(entry.key, `${entryPath}.key`),
      value: stringOf(entry.value, `${entryPath}.value`),
    };
  });
  let limit: LimitOverride | undefined;
  if (body.limit !== undefined && body.limit !== null) {
    const override = object(body.limit, `${path}.limit`);
    fieldsOnly(override, `${path}.limit`, ["requestsPerUnit", "requests_per_unit", "unit"]);
    limit = {
      requestsPerUnit:
        number(
          field(override, "requestsPerUnit", "requests_per_unit"),
          `${path}.limit.requestsPerUnit`,
        ) ?? 0,
      unit: unitFromJson(override.unit, `${path}.limit.unit`),
    };
  }
  return {
    entries,
    limit,
    hitsAddend: number(field(body, "hitsAddend", "hits_addend"), `${path}.hitsAddend`),
  };
}

function unitFromJson(value: unknown, path: string): number {
  if (value === undefined || value === null) return UNIT.UNKNOWN;
  if (typeof value === "number" && Number.isInteger(value)) return value;
  if (typeof value === "string" && value in UNIT) return UNIT[value as keyof typeof UNIT];
  throw invalid(`${path} must be a unit such as "MINUTE"; got ${JSON.stringify(value)}`);
}

export function responseToJson(response: RateLimitResponse): string {
  const body: Json = {};
  if (response.overallCode !== CODE.UNKNOWN) body.overallCode = codeName(response.overallCode);
  if (response.statuses.length > 0) body.statuses = response.statuses.map(statusToJson);
  if (response.responseHeadersToAdd.length > 0) {
    body.responseHeadersToAdd = response.responseHeadersToAdd;
  }
  if (response.requestHeadersToAdd.length > 0) {
    body.requestHeadersToAdd = response.requestHeadersToAdd;
  }
  return JSON.stringify(body);
}

function statusToJson(status: DescriptorStatus): Json {
  const body: Json = {};
  if (status.code !== CODE.UNKNOWN) body.code = codeName(status.code);
  const limit = status.currentLimit;
  if (limit !== undefined) {
    const current: Json = {};
    if (limit.name !== "") current.name = limit.name;
    if (limit.requestsPerUnit !== 0) current.requestsPerUnit = limit.requestsPerUnit;
    const unit = Object.entries(UNIT).find(([, number]) => number === limit.unit)?.[0];
    if (limit.unit !== UNIT.UNKNOWN) current.unit = unit ?? limit.unit;
    body.currentLimit = current;
  }
  if (status.limitRemaining !== 0) body.limitRemaining = status.limitRemaining;
  if (status.durationUntilResetMs !== undefined) {
    body.durationUntilReset = `${Number((status.durationUntilResetMs / 1000).toFixed(3))}s`;
  }
  return body;
}

function codeName(code: number): string {
  return code === CODE.OK ? "OK" : code === CODE.OVER_LIMIT ? "OVER_LIMIT" : "UNKNOWN";
}

function field(body: Json, camel: string, snake: string): unknown {
  return body[camel] ?? body[snake];
}

function object(value: unknown, path: string): Json {
  if (typeof value === "object" && value !== null && !Array.isArray(value)) return value as Json;
  throw invalid(`${path} must be an object`);
}

function list(value: unknown, path: string): unknown[] {
  if (value === undefined || value === null) return [];
  if (Array.isArray(value)) return value;
  throw invalid(`${path} must be a list`);
}

function stringOf(value: unknown, path: string): string {
  if (value === undefined || value === null) return "";
  if (typeof value === "string") return value;
  throw invalid(`${path} must be a string`);
}

/** A whole number 0 to 2^32-1, as a JSON number or a string of digits; undefined when absent. */
function number(value: unknown, path: string): number | undefined {
  if (value === undefined || value === null) return undefined;
  const parsed = typeof value === "string" && /^\d+$/.test(value) ? Number(value) : value;
  if (
    typeof parsed === "number" &&
    Number.isInteger(parsed) &&
    parsed >= 0 &&
    parsed <= 4_294_967_295
  ) {
    return parsed;
  }
  throw invalid(`${path} must be a whole number from 0 to 4294967295`);
}

function fieldsOnly(body: Json, path: string, allowed: readonly string[]): void {
  for (const name of Object.keys(body)) {
    if (!allowed.includes(name)) {
      throw invalid(`${path} has an unknown field "${name}" (known: ${allowed.join(", ")})`);
    }
  }
}

function invalid(message: string): EdgelimitError {
  return new EdgelimitError("EL_RLS_REQUEST", `invalid RateLimitRequest JSON: ${message}`);
}
