import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { withinOneWindow } from "../support/windows.js";
import {
  type CallResult,
  grpcJsClient,
  pythonCalls,
  type RlsClient,
  type RlsProcess,
  startRls,
} from "./harness.js";

/**
 * `ShouldRateLimit` over gRPC, through two client stacks that share no code with the server:
 * `@grpc/grpc-js` with Envoy's .proto files read by protobufjs, and Debian's python3-grpcio with
 * the same files compiled by protoc. Each runs the same calls against its own `edgelimit rls`
 * (fresh counters) with test/rls/fixtures/features.yaml, and must see exactly these statuses.
 */

type Code = "OK" | "OVER_LIMIT";
/** A descriptor's expected status: its code, and its limit and remaining when it has one. */
type Status =
  | readonly [Code]
  | readonly [Code, number, string, number]
  | readonly [Code, number, string, number, string];

interface Step {
  readonly what: string;
  readonly request: Record<string, unknown>;
  readonly overall?: Code;
  readonly statuses?: readonly Status[];
  /** The status of a descriptor that is `unlimited`: OK, remaining 4294967295. */
  readonly unlimited?: boolean;
  readonly error?: string;
}

const entry = (key: string, value: string) => ({ key, value });
const call = (
  descriptors: readonly (readonly { key: string; value: string }[])[],
  extra: Record<string, unknown> = {},
) => ({ domain: "features", descriptors: descriptors.map((entries) => ({ entries })), ...extra });
const one = (key: string, value: string, extra: Record<string, unknown> = {}) =>
  call([[entry(key, value)]], extra);

const STEPS: readonly Step[] = [
  {
    what: "a default counts per value",
    request: one("remote_address", "192.0.2.1"),
    overall: "OK",
    statuses: [["OK", 3, "HOUR", 2]],
  },
  {
    what: "second call",
    request: one("remote_address", "192.0.2.1"),
    overall: "OK",
    statuses: [["OK", 3, "HOUR", 1]],
  },
  {
    what: "third call",
    request: one("remote_address", "192.0.2.1"),
    overall: "OK",
    statuses: [["OK", 3, "HOUR", 0]],
  },
  {
    what: "fourth call is over",
    request: one("remote_address", "192.0.2.1"),
    overall: "OVER_LIMIT",
    statuses: [["OVER_LIMIT", 3, "HOUR", 0]],
  },
  {
    what: "another value has its own counter",
    request: one("remote_address", "192.0.2.2"),
    overall: "OK",
    statuses: [["OK", 3, "HOUR", 2]],
  },
  {
    what: "a value with its own limit",
    request: one("remote_address", "10.0.0.1"),
    overall: "OK",
    statuses: [["OK", 1, "HOUR", 0]],
  },
  {
    what: "its own limit refuses",
    request: one("remote_address", "10.0.0.1"),
    overall: "OVER_LIMIT",
    statuses: [["OVER_LIMIT", 1, "HOUR", 0]],
  },
  {
    what: "a value without a limit",
    request: one("remote_address", "10.0.0.2"),
    overall: "OK",
    statuses: [["OK"]],
  },
  {
    what: "nested",
    request: call([[entry("path", "/api"), entry("user", "u1")]]),
    overall: "OK",
    statuses: [["OK", 2, "HOUR", 1]],
  },
  {
    what: "the request's hits_addend",
    request: call([[entry("path", "/api"), entry("user", "u1")]], { hits_addend: 2 }),
    overall: "OVER_LIMIT",
    statuses: [["OVER_LIMIT", 2, "HOUR", 0]],
  },
  {
    what: "nested, another user",
    request: call([[entry("path", "/api"), entry("user", "u2")]]),
    overall: "OK",
    statuses: [["OK", 2, "HOUR", 1]],
  },
  {
    what: "nested under another path: no limit",
    request: call([[entry("path", "/other"), entry("user", "u1")]]),
    overall: "OK",
    statuses: [["OK"]],
  },
  {
    what: "shallower than the limit: none",
    request: one("path", "/api"),
    overall: "OK",
    statuses: [["OK"]],
  },
  {
    what: "deeper than the tree: none",
    request: call([[entry("path", "/api"), entry("user", "u3"), entry("extra", "x")]]),
    overall: "OK",
    statuses: [["OK"]],
  },
  {
    what: "trailing wildcard",
    request: one("route", "/files/a"),
    overall: "OK",
    statuses: [["OK", 2, "HOUR", 1]],
  },
  {
    what: "each value its own counter",
    request: one("route", "/files/b"),
    overall: "OK",
    statuses: [["OK", 2, "HOUR", 1]],
  },
  {
    what: "trailing wildcard again",
    request: one("route", "/files/a"),
    overall: "OK",
    statuses: [["OK", 2, "HOUR", 0]],
  },
  {
    what: "trailing wildcard over",
    request: one("route", "/files/a"),
    overall: "OVER_LIMIT",
    statuses: [["OVER_LIMIT", 2, "HOUR", 0]],
  },
  {
    what: "wildcard in the middle",
    request: one("route", "/v2/items"),
    overall: "OK",
    statuses: [["OK", 4, "DAY", 3]],
  },
  {
    what: "the middle wildcard does not match",
    request: one("route", "/v2/other"),
    overall: "OK",
    statuses: [["OK"]],
  },
  {
    what: "share_threshold",
    request: one("bucket", "shared-1"),
    overall: "OK",
    statuses: [["OK", 2, "HOUR", 1]],
  },
  {
    what: "share_threshold: another value, the same counter",
    request: one("bucket", "shared-2"),
    overall: "OK",
    statuses: [["OK", 2, "HOUR", 0]],
  },
  {
    what: "share_threshold over",
    request: one("bucket", "shared-3"),
    overall: "OVER_LIMIT",
    statuses: [["OVER_LIMIT", 2, "HOUR", 0]],
  },
  { what: "unlimited", request: one("free_pass", "x"), overall: "OK", unlimited: true },
  {
    what: "named limit",
    request: one("plan", "free"),
    overall: "OK",
    statuses: [["OK", 1, "HOUR", 0, "free"]],
  },
  {
    what: "named limit over",
    request: one("plan", "free"),
    overall: "OVER_LIMIT",
    statuses: [["OVER_LIMIT", 1, "HOUR", 0, "free"]],
  },
  {
    what: "replaced by another descriptor",
    request: call([[entry("plan", "free")], [entry("tier", "vip")]]),
    overall: "OK",
    statuses: [["OK"], ["OK", 5, "HOUR", 4]],
  },
  {
    what: "shadow_mode",
    request: one("trial", "t"),
    overall: "OK",
    statuses: [["OK", 1, "HOUR", 0]],
  },
  {
    what: "shadow_mode over: still OK",
    request: one("trial", "t"),
    overall: "OK",
    statuses: [["OK", 1, "HOUR", 0]],
  },
  {
    what: "quotas",
    request: call([[entry("quota_a", "q")], [entry("quota_b", "q")]]),
    overall: "OK",
    statuses: [
      ["OK", 1, "DAY", 0],
      ["OK", 2, "DAY", 1],
    ],
  },
  {
    what: "one quota over: OK",
    request: call([[entry("quota_a", "q")], [entry("quota_b", "q")]]),
    overall: "OK",
    statuses: [
      ["OVER_LIMIT", 1, "DAY", 0],
      ["OK", 2, "DAY", 0],
    ],
  },
  {
    what: "every quota over",
    request: call([[entry("quota_a", "q")], [entry("quota_b", "q")]]),
    overall: "OVER_LIMIT",
    statuses: [
      ["OVER_LIMIT", 1, "DAY", 0],
      ["OVER_LIMIT", 2, "DAY", 0],
    ],
  },
  {
    what: "a descriptor's hits_addend of 0 checks",
    request: {
      domain: "features",
      descriptors: [{ entries: [entry("detailed", "d")], hits_addend: { value: 0 } }],
    },
    overall: "OK",
    statuses: [["OK", 2, "DAY", 2]],
  },
  {
    what: "a descriptor's own hits_addend",
    request: {
      domain: "features",
      descriptors: [{ entries: [entry("detailed", "d")], hits_addend: { value: 2 } }],
      hits_addend: 5,
    },
    overall: "OK",
    statuses: [["OK", 2, "DAY", 0]],
  },
  {
    what: "the request's limit",
    request: {
      domain: "features",
      descriptors: [
        {
          entries: [entry("remote_address", "198.51.100.7")],
          limit: { requests_per_unit: 1, unit: "DAY" },
        },
      ],
    },
    overall: "OK",
    statuses: [["OK", 1, "DAY", 0]],
  },
  {
    what: "the request's limit refuses",
    request: {
      domain: "features",
      descriptors: [
        {
          entries: [entry("remote_address", "198.51.100.7")],
          limit: { requests_per_unit: 1, unit: "DAY" },
        },
      ],
    },
    overall: "OVER_LIMIT",
    statuses: [["OVER_LIMIT", 1, "DAY", 0]],
  },
  {
    what: "an unknown domain",
    request: {
      domain: "elsewhere",
      descriptors: [{ entries: [entry("remote_address", "192.0.2.1")] }],
    },
    overall: "OK",
    statuses: [["OK"]],
  },
  {
    what: "sliding window of 30m",
    request: one("sliding", "s"),
    overall: "OK",
    statuses: [["OK", 2, "UNKNOWN", 1]],
  },
  {
    what: "sliding window again",
    request: one("sliding", "s"),
    overall: "OK",
    statuses: [["OK", 2, "UNKNOWN", 0]],
  },
  {
    what: "sliding window over",
    request: one("sliding", "s"),
    overall: "OVER_LIMIT",
    statuses: [["OVER_LIMIT", 2, "UNKNOWN", 0]],
  },
  {
    what: "two limits: the fuller one reports",
    request: one("burst_and_day", "b"),
    overall: "OK",
    statuses: [["OK", 2, "DAY", 1, "features.burst_and_day.limits[0]"]],
  },
  {
    what: "two limits again",
    request: one("burst_and_day", "b"),
    overall: "OK",
    statuses: [["OK", 2, "DAY", 0, "features.burst_and_day.limits[0]"]],
  },
  {
    what: "the daily limit refuses before the hourly one",
    request: one("burst_and_day", "b"),
    overall: "OVER_LIMIT",
    statuses: [["OVER_LIMIT", 2, "DAY", 0, "features.burst_and_day.limits[0]"]],
  },
  {
    what: "token bucket",
    request: one("bucket_tb", "x"),
    overall: "OK",
    statuses: [["OK", 2, "HOUR", 1]],
  },
  {
    what: "token bucket again",
    request: one("bucket_tb", "x"),
    overall: "OK",
    statuses: [["OK", 2, "HOUR", 0]],
  },
  {
    what: "token bucket empty",
    request: one("bucket_tb", "x"),
    overall: "OVER_LIMIT",
    statuses: [["OVER_LIMIT", 2, "HOUR", 0]],
  },
  {
    what: "a descriptor without entries counts nothing, whatever its limit",
    request: {
      domain: "features",
      descriptors: [{ entries: [], limit: { requests_per_unit: 1, unit: "DAY" } }],
    },
    overall: "OK",
    statuses: [["OK"]],
  },
  {
    what: "no domain",
    request: { domain: "", descriptors: [{ entries: [entry("a", "b")] }] },
    error: "INVALID_ARGUMENT",
  },
  {
    what: "no descriptor",
    request: { domain: "features", descriptors: [] },
    error: "INVALID_ARGUMENT",
  },
];

/** The longest wait to a full limit: a unit, or for the 30m sliding window two of its windows. */
const UNIT_SECONDS: Record<string, number> = { HOUR: 3600, DAY: 86_400, UNKNOWN: 3600 };

/** Checks one outcome against its step; returns it without the reset times (they tick). */
function check(step: Step, result: CallResult): CallResult {
  if (step.error !== undefined) {
    expect(result.error?.code, step.what).toBe(step.error);
    return { error: { code: result.error?.code ?? "", details: "" } };
  }
  expect(result.error, step.what).toBeUndefined();
  expect(result.overall_code, step.what).toBe(step.overall);
  const statuses = result.statuses ?? [];
  if (step.unlimited === true) {
    expect(statuses, step.what).toEqual([{ code: "OK", limit_remaining: 4_294_967_295 }]);
  } else {
    expect(
      statuses.map((status) => {
        const limit = status.current_limit;
        if (limit === undefined) return [status.code];
        const shape = [status.code, limit.requests_per_unit, limit.unit, status.limit_remaining];
        return limit.name === "" ? shape : [...shape, limit.name];
      }),
      step.what,
    ).toEqual(step.statuses);
    for (const status of statuses) {
      if (status.current_limit === undefined) continue;
      expect(status.reset_seconds, step.what).toBeGreaterThan(0);
      expect(status.reset_seconds, step.what).toBeLessThanOrEqual(
        UNIT_SECONDS[status.current_limit.unit] ?? 86_400,
      );
    }
  }
  const retryAfter = result.response_headers_to_add?.["retry-after"];
  if (step.overall === "OVER_LIMIT") expect(Number(retryAfter), step.what).toBeGreaterThan(0);
  else expect(retryAfter, step.what).toBeUndefined();
  return {
    ...result,
    statuses: statuses.map(({ reset_seconds: _reset, ...rest }) => rest),
    response_headers_to_add: undefined,
  };
}

const FEATURES = ["--config", "test/rls/fixtures/features.yaml"];
let forGrpcJs: RlsProcess;
let forPython: RlsProcess;
let client: RlsClient;

beforeAll(async () => {
  // Hour and day windows: the calls must not straddle the end of an hour.
  await withinOneWindow(3_600_000, 15_000);
  [forGrpcJs, forPython] = await Promise.all([startRls(FEATURES), startRls(FEATURES)]);
  client = grpcJsClient(forGrpcJs.grpcPort);
});

afterAll(async () => {
  client?.close();
  await Promise.all([forGrpcJs?.stop(), forPython?.stop()]);
});

describe("ShouldRateLimit over gRPC with envoyproxy/ratelimit's configuration", () => {
  it("gives exactly these statuses to @grpc/grpc-js and to python3-grpcio alike", async () => {
    const fromGrpcJs: CallResult[] = [];
    for (const step of STEPS)
      fromGrpcJs.push(check(step, await client.shouldRateLimit(step.request)));
    const fromPython = (
      await pythonCalls(
        forPython.grpcPort,
        STEPS.map((step) => step.request),
      )
    ).map((result, index) => check(STEPS[index] as Step, result));
    expect(fromPython).toEqual(fromGrpcJs);
  });

  it("answers grpc.health.v1.Health/Check for the server and the service", async () => {
    expect(await client.health("")).toBe("SERVING");
    expect(await client.health("envoy.service.ratelimit.v3.RateLimitService")).toBe("SERVING");
    await expect(client.health("something.Else")).rejects.toMatchObject({ code: 5 });
  });
});
