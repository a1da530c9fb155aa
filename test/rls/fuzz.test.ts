import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { EdgelimitError } from "../../src/core/errors.js";
import { MemoryStore } from "../../src/index.js";
import { loadPolicy } from "../../src/policy/load.js";
import { decodeRateLimitRequest } from "../../src/rls/codec.js";
import { loadRlsConfig } from "../../src/rls/config-files.js";
import type { RateLimitRequest } from "../../src/rls/messages.js";
import { requestFromJson } from "../../src/rls/protojson.js";
import { RateLimitService } from "../../src/rls/service.js";
import { upstreamRoot } from "./harness.js";

/**
 * No input is an internal error. What reaches the gRPC listener is decoded by the listener's own
 * deserializer and decided by the service; what reaches `POST /json` is parsed and decided the
 * same way. Each either answers or is refused with `EL_RLS_REQUEST`, which grpc.ts answers with
 * `INVALID_ARGUMENT` and http.ts with 400; any other error would be `INTERNAL` or 500, which
 * Envoy (with its default `failure_mode_deny: false`) takes for a store failure and admits.
 * The service counts in memory, with the configuration of every feature (features.yaml) and a
 * policy for the domains it does not name.
 */

const service = new RateLimitService({
  store: new MemoryStore(),
  config: loadRlsConfig("test/rls/fixtures/features.yaml", {
    mergeDomains: false,
    globalShadow: false,
  }).config,
  policy: loadPolicy("test/rls/fixtures/policy.yaml"),
});
/** As the gRPC listener decodes a call: the message, or the refusal it answers with. */
function decode(bytes: Uint8Array): RateLimitRequest | EdgelimitError {
  try {
    return decodeRateLimitRequest(bytes, service.requestLimits.maxDescriptors);
  } catch (error) {
    if (error instanceof EdgelimitError) return error;
    throw error;
  }
}
const RateLimitRequestType = upstreamRoot().lookupType(
  "envoy.service.ratelimit.v3.RateLimitRequest",
);

/** Undefined when the call was answered; the error when it was refused as it should be. */
async function decided(request: RateLimitRequest | EdgelimitError): Promise<unknown> {
  if (request instanceof EdgelimitError) return request;
  try {
    const answer = await service.shouldRateLimit(request, "127.0.0.1");
    expect(answer.response ?? answer.unavailable).toBeDefined();
    return undefined;
  } catch (error) {
    return error;
  }
}

function expectAnsweredOrRefused(outcome: unknown): void {
  if (outcome === undefined) return;
  expect(outcome).toBeInstanceOf(EdgelimitError);
  expect((outcome as EdgelimitError).code).toBe("EL_RLS_REQUEST");
}

/** Numbers at every edge: small, the largest cost, uint32, past 2^53, the largest uint64. */
const edgeNumber = fc.oneof(
  fc.integer({ min: 0, max: 12 }),
  fc.constantFrom(999_999_999, 1_000_000_000, 1_000_000_001, 4_294_967_295, 4_294_967_296),
  fc.constantFrom("9007199254740993", "18446744073709551615"),
  fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }).map(String),
);
const key = fc.oneof(
  fc.constantFrom(
    "remote_address",
    "path",
    ":path",
    "method",
    "authorization",
    "user",
    "route",
    "bucket",
    "free_pass",
    "plan",
    "tier",
    "trial",
    "quota_a",
    "quota_b",
    "sliding",
    "burst_and_day",
    "bucket_tb",
    "x-forwarded-for",
  ),
  fc.string({ maxLength: 8 }),
);
const value = fc.oneof(
  {
    arbitrary: fc.constantFrom("10.0.0.1", "/api", "/files/a", "/v2/items", "shared-x", "vip"),
    weight: 8,
  },
  { arbitrary: fc.string({ unit: "binary", maxLength: 12 }), weight: 8 },
  {
    arbitrary: fc
      .integer({ min: 0xd800, max: 0xdfff })
      .map((code) => `a${String.fromCharCode(code)}`),
    weight: 2,
  },
  // About the largest a descriptor may hold (65,536 bytes), either side of it.
  {
    arbitrary: fc.integer({ min: 65_400, max: 65_600 }).map((length) => "v".repeat(length)),
    weight: 1,
  },
);
const descriptor = fc.record(
  {
    entries: fc.oneof(
      { arbitrary: fc.array(fc.record({ key, value }), { maxLength: 4 }), weight: 6 },
      {
        arbitrary: fc.array(fc.record({ key, value }), { minLength: 15, maxLength: 18 }),
        weight: 1,
      },
    ),
    limit: fc.record({ requests_per_unit: edgeNumber, unit: fc.integer({ min: 0, max: 9 }) }),
    hits_addend: fc.record({ value: edgeNumber }),
  },
  { requiredKeys: ["entries"] },
);
const request = fc.record(
  {
    domain: fc.oneof(fc.constantFrom("features", "other", ""), fc.string({ maxLength: 6 })),
    descriptors: fc.oneof(
      { arbitrary: fc.array(descriptor, { maxLength: 4 }), weight: 6 },
      // Either side of the most one call may hold (64).
      { arbitrary: fc.array(descriptor, { minLength: 62, maxLength: 66 }), weight: 1 },
    ),
    hits_addend: edgeNumber,
  },
  { requiredKeys: ["domain", "descriptors"] },
);

describe("no call is an internal error", () => {
  it("answers or refuses any bytes sent as a gRPC message", async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 256 }), async (bytes) => {
        expectAnsweredOrRefused(await decided(decode(Buffer.from(bytes))));
      }),
      { numRuns: 3_000 },
    );
  });

  it("answers or refuses any RateLimitRequest Envoy's protos can encode", async () => {
    await fc.assert(
      fc.asyncProperty(request, async (message) => {
        const bytes = RateLimitRequestType.encode(
          RateLimitRequestType.fromObject(message),
        ).finish();
        expectAnsweredOrRefused(await decided(decode(Buffer.from(bytes))));
      }),
      { numRuns: 400 },
    );
  });

  it("answers or refuses any JSON body, a RateLimitRequest's or not", async () => {
    const json = fc.oneof(
      fc.json(),
      request.map((message) => JSON.stringify(message)),
      request.map((message) =>
        // The JSON mapping's names and a uint64 as a number, which JSON.parse rounds.
        JSON.stringify(message)
          .replaceAll('"hits_addend"', '"hitsAddend"')
          .replaceAll(/"(\d+)"/g, "$1"),
      ),
    );
    await fc.assert(
      fc.asyncProperty(json, async (text) => {
        let parsed: RateLimitRequest;
        try {
          parsed = requestFromJson(text);
        } catch (error) {
          expectAnsweredOrRefused(error);
          return;
        }
        expectAnsweredOrRefused(await decided(parsed));
      }),
      { numRuns: 400 },
    );
  });
});
