import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  decodeHealthCheckRequest,
  decodeRateLimitRequest,
  encodeHealthCheckResponse,
  encodeRateLimitResponse,
} from "../../src/rls/codec.js";
import type { RateLimitResponse } from "../../src/rls/messages.js";
import { upstreamRoot } from "./harness.js";

/**
 * The service's own protobuf codec against Envoy's and gRPC's `.proto` files as protobufjs
 * reads them: every request protobufjs writes decodes to the same fields, every response the
 * service writes reads back the same in protobufjs.
 */

const root = upstreamRoot();
const Request = root.lookupType("envoy.service.ratelimit.v3.RateLimitRequest");
const Response = root.lookupType("envoy.service.ratelimit.v3.RateLimitResponse");
const HealthRequest = root.lookupType("grpc.health.v1.HealthCheckRequest");
const HealthResponse = root.lookupType("grpc.health.v1.HealthCheckResponse");

const uint32 = fc.integer({ min: 0, max: 4_294_967_295 });
const text = fc.string({ unit: "grapheme", maxLength: 12 });
const descriptor = fc.record(
  {
    entries: fc.array(fc.record({ key: text, value: text }), { maxLength: 4 }),
    limit: fc.record({ requests_per_unit: uint32, unit: fc.integer({ min: 0, max: 7 }) }),
    hits_addend: fc.record({ value: uint32 }),
  },
  { requiredKeys: ["entries"] },
);
const request = fc.record({
  domain: text,
  descriptors: fc.array(descriptor, { maxLength: 4 }),
  hits_addend: uint32,
});

describe("the codec against Envoy's .proto files", () => {
  it("decodes every RateLimitRequest protobufjs encodes", () => {
    fc.assert(
      fc.property(request, (input) => {
        const bytes = Request.encode(Request.fromObject(input)).finish();
        expect(decodeRateLimitRequest(bytes)).toEqual({
          domain: input.domain,
          hitsAddend: input.hits_addend,
          descriptors: input.descriptors.map((item) => ({
            entries: item.entries,
            limit:
              item.limit === undefined
                ? undefined
                : { requestsPerUnit: item.limit.requests_per_unit, unit: item.limit.unit },
            hitsAddend: item.hits_addend?.value,
          })),
        });
      }),
      { numRuns: 300 },
    );
  });

  it("skips fields it does not know, as a newer Envoy may send", () => {
    const known = Request.encode(Request.fromObject({ domain: "d", hits_addend: 2 })).finish();
    // Field 9 as a varint, field 10 as bytes, field 11 as fixed64 and field 12 as fixed32.
    const unknown = Buffer.from([
      0x48, 0x96, 0x01, 0x52, 0x02, 0x61, 0x62, 0x59, 1, 2, 3, 4, 5, 6, 7, 8, 0x65, 1, 2, 3, 4,
    ]);
    expect(decodeRateLimitRequest(Buffer.concat([unknown, known]))).toEqual({
      domain: "d",
      descriptors: [],
      hitsAddend: 2,
    });
  });

  it("refuses a message that ends inside a field", () => {
    const bytes = Request.encode(Request.fromObject({ domain: "domain" })).finish();
    expect(() => decodeRateLimitRequest(bytes.subarray(0, 4))).toThrow(/malformed protobuf/);
  });

  it("stops reading descriptors at the one past the most a call may hold", () => {
    const message = (count: number) =>
      Request.encode(
        Request.fromObject({
          domain: "d",
          descriptors: Array.from({ length: count }, (_, index) => ({
            entries: [{ key: "k", value: `v${index}` }],
          })),
        }),
      ).finish();
    expect(decodeRateLimitRequest(message(64), 64).descriptors).toHaveLength(64);
    // The refusal comes from the 65th: the rest of the message is never read (it is not even
    // well formed here).
    const cut = message(50_000).subarray(0, 4_000);
    expect(() => decodeRateLimitRequest(cut, 64)).toThrow(
      expect.objectContaining({
        code: "EL_RLS_REQUEST",
        message: expect.stringContaining("more than 64 descriptors"),
      }),
    );
    expect(() => decodeRateLimitRequest(cut)).toThrow(/runs past the end/);
  });

  it("encodes every RateLimitResponse so that protobufjs reads the same", () => {
    const status = fc.record({
      code: fc.constantFrom(0, 1, 2),
      currentLimit: fc.option(
        fc.record({ name: text, requestsPerUnit: uint32, unit: fc.integer({ min: 0, max: 7 }) }),
        { nil: undefined },
      ),
      limitRemaining: uint32,
      durationUntilResetMs: fc.option(fc.integer({ min: 0, max: 400 * 86_400_000 }), {
        nil: undefined,
      }),
    });
    const header = fc.record({ key: text, value: text });
    const response = fc.record({
      overallCode: fc.constantFrom(0, 1, 2),
      statuses: fc.array(status, { maxLength: 4 }),
      responseHeadersToAdd: fc.array(header, { maxLength: 3 }),
      requestHeadersToAdd: fc.array(header, { maxLength: 3 }),
    }) as fc.Arbitrary<RateLimitResponse>;
    fc.assert(
      fc.property(response, (input) => {
        const read = Response.toObject(Response.decode(encodeRateLimitResponse(input)), {
          longs: Number,
          defaults: true,
        });
        expect(read).toMatchObject({
          overall_code: input.overallCode,
          statuses: input.statuses.map((item) => ({
            code: item.code,
            limit_remaining: item.limitRemaining,
            ...(item.currentLimit === undefined
              ? {}
              : {
                  current_limit: {
                    name: item.currentLimit.name,
                    requests_per_unit: item.currentLimit.requestsPerUnit,
                    unit: item.currentLimit.unit,
                  },
                }),
            ...(item.durationUntilResetMs === undefined
              ? {}
              : {
                  duration_until_reset: {
                    seconds: Math.floor(item.durationUntilResetMs / 1000),
                    nanos: (item.durationUntilResetMs % 1000) * 1_000_000,
                  },
                }),
          })),
          response_headers_to_add: input.responseHeadersToAdd,
          request_headers_to_add: input.requestHeadersToAdd,
        });
        for (const [index, item] of input.statuses.entries()) {
          const statusRead = (read.statuses as Record<string, unknown>[])[index] as Record<
            string,
            unknown
          >;
          if (item.currentLimit === undefined) expect(statusRead.current_limit).toBeNull();
        }
      }),
      { numRuns: 300 },
    );
  });

  it("reads grpc.health.v1's request and writes its response", () => {
    const bytes = HealthRequest.encode(HealthRequest.fromObject({ service: "ratelimit" })).finish();
    expect(decodeHealthCheckRequest(bytes)).toEqual({ service: "ratelimit" });
    for (const status of [0, 1, 2, 3] as const) {
      expect(
        HealthResponse.toObject(HealthResponse.decode(encodeHealthCheckResponse(status)), {
          defaults: true,
        }),
      ).toEqual({
        status,
      });
    }
  });
});
