/**
 * The rows of the options table: each public function that takes options, with good ones and
 * the three mistakes made from them.
 */
import type { ErrorCode } from "../../../src/core/errors.js";
import { type Loose, limiter, m, policy, store } from "./entries.js";

/** One function's options: valid ones, and the three mistakes made from them. */
export interface Row {
  readonly entry: string;
  /** The exports this row covers (a factory and its class). */
  readonly exports: readonly string[];
  /** The name the message starts with. */
  readonly name: string;
  readonly call: (options: Loose) => unknown;
  readonly code: ErrorCode;
  readonly valid: Readonly<Record<string, unknown>>;
  /** An option of `valid` (or not), and its misspelling. */
  readonly misspelt: readonly [right: string, wrong: string];
  /** A required option of `valid`, left out; undefined when none is required. */
  readonly required: string | undefined;
  /** An option, a value of the wrong kind, and what the message says it must be. */
  readonly wrongKind: readonly [option: string, value: unknown, mustBe: string];
  /** A call with good options would connect to a server: none is made here. */
  readonly connects?: boolean;
}

const GUARD_ROW = {
  valid: { limiter },
  misspelt: ["skip", "skipp"],
  required: "limiter",
  wrongKind: ["skip", "/health", "a function"],
  code: "EL_BAD_OPTION",
} as const;

export const ROWS: readonly Row[] = [
  {
    entry: "edgelimit",
    exports: ["createLimiter"],
    name: "createLimiter",
    call: (options) => m("edgelimit").createLimiter(options),
    code: "EL_BAD_OPTION",
    valid: { policy, store },
    misspelt: ["policy", "polcy"],
    required: "store",
    wrongKind: ["onStoreError", "warn", "a function or false"],
  },
  {
    entry: "edgelimit",
    exports: ["Limiter"],
    name: "createLimiter",
    call: (options) => new (m("edgelimit").Limiter)(options),
    code: "EL_BAD_OPTION",
    valid: { policy, store },
    misspelt: ["blockCache", "blockcache"],
    required: "policy",
    wrongKind: ["policy", { tiers: { anonymous: { global: 5 } } }, "a policy from definePolicy"],
  },
  {
    entry: "edgelimit",
    exports: ["createRateLimit"],
    name: "createRateLimit",
    call: (options) => m("edgelimit").createRateLimit(options),
    code: "EL_BAD_OPTION",
    valid: { store, limit: 5, window: "60s" },
    misspelt: ["limit", "limt"],
    required: "window",
    wrongKind: ["limit", "5", "a number"],
  },
  {
    entry: "edgelimit",
    exports: ["memoryStore", "MemoryStore"],
    name: "memoryStore",
    call: (options) => m("edgelimit").memoryStore(options),
    code: "EL_STORE_OPTION",
    valid: {},
    misspelt: ["maxKeys", "maxKey"],
    required: undefined,
    wrongKind: ["maxKeys", "1000", "a number"],
  },
  {
    entry: "edgelimit",
    exports: ["hybridCounting"],
    name: "hybridCounting",
    call: (options) => m("edgelimit").hybridCounting(store, options),
    code: "EL_STORE_OPTION",
    valid: {},
    misspelt: ["leaseMs", "leasMs"],
    required: undefined,
    wrongKind: ["leaseMs", "10s", "a number"],
  },
  {
    entry: "edgelimit/redis",
    exports: ["redisStore", "RedisStore"],
    name: "redisStore",
    call: (options) => m("edgelimit/redis").redisStore(options),
    code: "EL_STORE_OPTION",
    valid: { client: "redis://127.0.0.1:6379" },
    misspelt: ["client", "clinet"],
    required: "client",
    wrongKind: ["maxBatch", "64", "a number"],
  },
  {
    entry: "edgelimit/redis",
    exports: ["createRedisClient"],
    name: "createRedisClient",
    call: (options) => m("edgelimit/redis").createRedisClient("redis://127.0.0.1:6379", options),
    connects: true,
    code: "EL_STORE_OPTION",
    valid: {},
    misspelt: ["connectTimeoutMs", "connectTimeout"],
    required: undefined,
    wrongKind: ["connectTimeoutMs", "1s", "a number"],
  },
  {
    entry: "edgelimit/redis",
    exports: ["redisClientOptions"],
    name: "redisClientOptions",
    call: (options) => m("edgelimit/redis").redisClientOptions(options),
    code: "EL_STORE_OPTION",
    valid: {},
    misspelt: ["maxReconnectDelayMs", "maxReconnectDelay"],
    required: undefined,
    wrongKind: ["maxReconnectDelayMs", "200ms", "a number"],
  },
  ...["edgelimit/redis", "edgelimit/redis-rest"].map(
    (entry): Row => ({
      entry,
      exports: ["CircuitBreaker"],
      name: "CircuitBreaker",
      call: (options) => new (m(entry).CircuitBreaker)(options),
      code: "EL_STORE_OPTION",
      valid: {},
      misspelt: ["cooldownMs", "coolDown"],
      required: undefined,
      wrongKind: ["failureThreshold", "5", "a number"],
    }),
  ),
  {
    entry: "edgelimit/redis-rest",
    exports: ["redisRestStore", "RedisRestStore"],
    name: "redisRestStore",
    call: (options) => m("edgelimit/redis-rest").redisRestStore(options),
    code: "EL_STORE_OPTION",
    valid: { url: "https://redis.example.test", token: "t0ken" },
    misspelt: ["token", "tokn"],
    required: "url",
    wrongKind: ["breaker", true, "false or an object"],
  },
  {
    entry: "edgelimit/redis-rest",
    exports: ["RedisRestClient"],
    name: "RedisRestClient",
    call: (options) => new (m("edgelimit/redis-rest").RedisRestClient)(options),
    code: "EL_STORE_OPTION",
    valid: { url: "https://redis.example.test", token: "t0ken" },
    misspelt: ["url", "uri"],
    required: "token",
    wrongKind: ["token", 12345, "the database's REST token, a string (Upstash"],
  },
  {
    entry: "edgelimit/dynamodb",
    exports: ["dynamodbStore", "DynamoDbStore"],
    name: "dynamodbStore",
    call: (options) => m("edgelimit/dynamodb").dynamodbStore(options),
    code: "EL_STORE_OPTION",
    valid: { region: "eu-west-1" },
    misspelt: ["region", "regoin"],
    required: "region",
    wrongKind: ["globalRegions", "eu-west-1,us-east-1", "an array"],
  },
  {
    entry: "edgelimit/dynamodb",
    exports: ["DynamoDbHttpClient"],
    name: "DynamoDbHttpClient",
    call: (options) => new (m("edgelimit/dynamodb").DynamoDbHttpClient)(options),
    code: "EL_STORE_OPTION",
    valid: { region: "eu-west-1" },
    misspelt: ["endpoint", "endpiont"],
    required: "region",
    wrongKind: ["requestTimeoutMs", "3s", "a number"],
  },
  {
    entry: "edgelimit/dynamodb-fetch",
    exports: ["dynamodbFetchStore", "DynamoDbFetchStore"],
    name: "dynamodbFetchStore",
    call: (options) => m("edgelimit/dynamodb-fetch").dynamodbFetchStore(options),
    code: "EL_STORE_OPTION",
    valid: { region: "eu-west-1" },
    misspelt: ["credentials", "credential"],
    required: "region",
    wrongKind: ["credentials", "AKIA:secret", "credentials { accessKeyId"],
  },
  {
    entry: "edgelimit/dynamodb-fetch",
    exports: ["DynamoDbFetchClient"],
    name: "DynamoDbFetchClient",
    call: (options) => new (m("edgelimit/dynamodb-fetch").DynamoDbFetchClient)(options),
    code: "EL_STORE_OPTION",
    valid: { region: "eu-west-1" },
    misspelt: ["connectTimeoutMs", "connectTimeoutMS"],
    required: "region",
    wrongKind: ["breaker", "off", "false or an object"],
  },
  {
    entry: "edgelimit/lambda-edge",
    exports: ["createViewerRequestHandler"],
    name: "createViewerRequestHandler",
    call: (options) => m("edgelimit/lambda-edge").createViewerRequestHandler(options),
    code: "EL_BAD_OPTION",
    valid: { policy, store },
    misspelt: ["store", "stor"],
    required: "policy",
    wrongKind: ["metrics", true, "false or an object"],
  },
  {
    entry: "edgelimit/lambda-edge",
    exports: ["emfRecorder"],
    name: "emfRecorder",
    call: (options) => m("edgelimit/lambda-edge").emfRecorder(policy, options),
    code: "EL_BAD_OPTION",
    valid: {},
    misspelt: ["namespace", "namespce"],
    required: undefined,
    wrongKind: ["write", "console", "a function"],
  },
  {
    entry: "edgelimit/lambda-edge",
    exports: ["edgeOverrides"],
    name: "edgeOverrides",
    call: (options) =>
      m("edgelimit/lambda-edge").edgeOverrides(
        { client: {}, table: "rate-limits", expectedRoundTripMs: 0 },
        options,
      ),
    code: "EL_BAD_OPTION",
    valid: { policy },
    misspelt: ["refreshMs", "refreshMS"],
    required: "policy",
    wrongKind: ["globalTables", "yes", "true or false"],
  },
  {
    entry: "edgelimit/lambda-edge",
    exports: ["bundledStoreOptions"],
    name: "bundledStoreOptions",
    call: (options) => m("edgelimit/lambda-edge").bundledStoreOptions(options, "us-east-1"),
    code: "EL_STORE_OPTION",
    valid: { region: "eu-west-1" },
    misspelt: ["table", "tabel"],
    required: "region",
    wrongKind: ["region", 42, "a region such as eu-west-1"],
  },
  ...["createCloudflareHandler", "cloudflareLimiter", "rateLimitMiddleware"].map(
    (name): Row => ({
      entry: "edgelimit/cloudflare",
      exports: name === "cloudflareLimiter" ? [name, "CloudflareLimiter"] : [name],
      name,
      call: (options) => m("edgelimit/cloudflare")[name](options),
      code: "EL_BAD_OPTION",
      valid: { policy, ratelimits: {} },
      misspelt: ["ratelimits", "rateLimits"],
      required: "ratelimits",
      wrongKind: ["onRefused", "429", "a function"],
    }),
  ),
  {
    entry: "edgelimit/cloudflare",
    exports: ["cloudflareStore", "CloudflareStore"],
    name: "cloudflareStore",
    call: (options) => m("edgelimit/cloudflare").cloudflareStore(options),
    code: "EL_STORE_OPTION",
    valid: { env: {}, ratelimits: {}, counter: "EDGELIMIT_COUNTER" },
    misspelt: ["counter", "countr"],
    required: "env",
    wrongKind: ["approximate", "global", "an array"],
  },
  {
    ...GUARD_ROW,
    entry: "edgelimit/fetch",
    exports: ["withRateLimit"],
    name: "withRateLimit",
    call: (options) => m("edgelimit/fetch").withRateLimit(() => new Response("ok"), options),
  },
  {
    ...GUARD_ROW,
    entry: "edgelimit/fetch",
    exports: ["honoRateLimit"],
    name: "honoRateLimit",
    call: (options) => m("edgelimit/fetch").honoRateLimit(options),
  },
  ...["nodeRateLimit", "fastifyRateLimit"].map(
    (name): Row => ({
      ...GUARD_ROW,
      entry: "edgelimit/node",
      exports: [name],
      name,
      call: (options) => m("edgelimit/node")[name](options),
    }),
  ),
  {
    ...GUARD_ROW,
    entry: "edgelimit/node",
    exports: ["guardNodeRequest"],
    name: "guardNodeRequest",
    call: (options) => m("edgelimit/node").guardNodeRequest(options, {}, {}),
  },
  {
    entry: "edgelimit/node",
    exports: ["prometheusMetrics", "NodeMetrics"],
    name: "prometheusMetrics",
    call: (options) => m("edgelimit/node").prometheusMetrics(limiter, options),
    code: "EL_BAD_OPTION",
    valid: {},
    misspelt: ["registry", "registery"],
    required: undefined,
    wrongKind: ["registry", "default", "an object"],
  },
];
