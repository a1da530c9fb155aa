/**
 * The rest of the published surface: functions whose positional arguments are checked, and
 * exports that take no options, each with the reason.
 */
import type { ErrorCode } from "../../../src/core/errors.js";
import { limiter, m, policy } from "./entries.js";

/** Functions whose positional arguments are checked: a call with one of the wrong kind. */
export const ARGUMENTS: readonly {
  readonly entry: string;
  readonly name: string;
  readonly call: () => unknown;
  readonly code: ErrorCode;
  readonly message: string;
}[] = [
  {
    entry: "edgelimit",
    name: "loadPolicy",
    call: () => m("edgelimit").loadPolicy({ tiers: {} }),
    code: "EL_BAD_OPTION",
    message: "loadPolicy: the file's path must be a string; got an object",
  },
  {
    entry: "edgelimit",
    name: "parsePolicy",
    call: () => m("edgelimit").parsePolicy(undefined),
    code: "EL_BAD_OPTION",
    message: "parsePolicy: the policy's text must be a string; got undefined",
  },
  {
    entry: "edgelimit",
    name: "hybridCounting",
    call: () => m("edgelimit").hybridCounting({ leaseMs: 5000 }),
    code: "EL_STORE_OPTION",
    message: "hybridCounting: the store (first argument) must be a store (memoryStore()",
  },
  {
    entry: "edgelimit/redis",
    name: "redisStoreFromUrl",
    call: () => m("edgelimit/redis").redisStoreFromUrl({ client: "redis://127.0.0.1" }),
    code: "EL_STORE_URL",
    message: "redisStoreFromUrl: the URL must be a string; got an object",
  },
  {
    entry: "edgelimit/redis",
    name: "createRedisClient",
    call: () => m("edgelimit/redis").createRedisClient(6379),
    code: "EL_STORE_URL",
    message: "createRedisClient: the URL must be a string; got 6379",
  },
  ...["redisRestOptionsFromUrl", "redisRestStoreFromUrl"].map((name) => ({
    entry: "edgelimit/redis-rest",
    name,
    call: () => m("edgelimit/redis-rest")[name](undefined),
    code: "EL_STORE_URL" as const,
    message: `${name}: the URL must be a string; got undefined`,
  })),
  ...["dynamodbStoreFromUrl", "parseDynamodbUrl"].map((name) => ({
    entry: "edgelimit/dynamodb",
    name,
    call: () => m("edgelimit/dynamodb")[name]({ region: "eu-west-1" }),
    code: "EL_STORE_URL" as const,
    message: `${name}: the URL must be a string; got an object`,
  })),
  {
    entry: "edgelimit/lambda-edge",
    name: "lazyChallenge",
    call: () => m("edgelimit/lambda-edge").lazyChallenge(policy),
    code: "EL_BAD_OPTION",
    message: "lazyChallenge: create (second argument) must be a function; got undefined",
  },
  {
    entry: "edgelimit/lambda-edge",
    name: "emfRecorder",
    call: () => m("edgelimit/lambda-edge").emfRecorder({ namespace: "edgelimit" }),
    code: "EL_BAD_OPTION",
    message: "emfRecorder: the policy (first argument) must be a policy from definePolicy",
  },
  {
    entry: "edgelimit/fetch",
    name: "withRateLimit",
    call: () => m("edgelimit/fetch").withRateLimit({ limiter }),
    code: "EL_BAD_OPTION",
    message: "withRateLimit: the handler (first argument) must be a function; got an object",
  },
  {
    entry: "edgelimit/node",
    name: "prometheusMetrics",
    call: () => m("edgelimit/node").prometheusMetrics({ registry: undefined }),
    code: "EL_BAD_OPTION",
    message: "prometheusMetrics: the limiter (first argument) must be a limiter from createLimiter",
  },
];

/** Exports that take no options object, each with the reason. */
export const NO_OPTIONS: Readonly<Record<string, Readonly<Record<string, string>>>> = {
  edgelimit: {
    ALGORITHMS: "a constant",
    applyCounters:
      "a store author's building block: counters, a time and the store's own states, no options",
    LATE_GRACE_MS: "a constant",
    MAX_COST: "a constant",
    RESET_CHECK_MS: "a constant",
    ResetWatch: "a store author's building block, given its arguments by the store's own code",
    EdgelimitError: "the error class itself",
    definePolicy: "takes the policy, checked by its schema (EL_POLICY_* codes)",
    formatIssue: "formats an issue of an error",
  },
  "edgelimit/redis": {
    APPLY_COUNTERS_FUNCTION: "a constant",
    APPLY_COUNTERS_LIBRARY: "a constant",
    APPLY_COUNTERS_LUA: "a constant",
    APPLY_COUNTERS_SHA: "a constant",
  },
  "edgelimit/redis-rest": {
    REDIS_REST_TOKEN_VARIABLE: "a constant",
    RedisReplyError: "an error class",
  },
  "edgelimit/dynamodb": { DynamoDbError: "an error class" },
  "edgelimit/dynamodb-fetch": { DynamoDbError: "an error class" },
  "edgelimit/lambda-edge": {
    HANDOVER_HEADER: "a constant",
    createViewerResponseHandler: "takes nothing",
    toCloudFrontHeaders: "converts a record of headers",
  },
  "edgelimit/cloudflare": {
    BINDING_PERIODS_SECONDS: "a constant",
    DEFAULT_COUNTER_BINDING: "a constant",
    EdgelimitCounter: "the Durable Object, constructed by workerd",
    approximateRules: "reads a resolved policy",
    assertCloudflarePolicy: "reads a resolved policy",
    backendOf: "reads a resolved rule",
    bindingKey: "builds a key",
    bindingNameFor: "reads a resolved rule",
    checkCloudflarePolicy: "reads a resolved policy",
  },
  "edgelimit/fetch": {
    describeRequest: "translates a Request",
    forwardRequest: "translates a Request",
    refusalResponse: "translates a verdict",
    withHeaders: "adds headers to a Response",
  },
  "edgelimit/node": {
    describeNodeRequest: "translates a request",
    sendRefusal: "writes a verdict",
    toWebRequest: "translates a request",
    writeWebResponse: "writes a Response",
  },
};
