/**
 * Every public function's options, as plain JavaScript passes them (through `any`, where no
 * type stops a mistake): each export of each entry point of package.json `exports` is either a
 * row here (a misspelt option, a missing required one, one of the wrong kind), a function whose
 * positional arguments are checked, or listed with the reason it takes no options. Each mistake
 * is an `EdgelimitError` with its code and a message that names the function and the option,
 * never a TypeError from deep inside.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { EdgelimitError, type ErrorCode } from "../../src/core/errors.js";
import { definePolicy } from "../../src/policy/load.js";
import { memoryStore } from "../../src/stores/memory.js";

// biome-ignore lint/suspicious/noExplicitAny: the table calls as plain JavaScript does.
type Loose = any;

/** Each entry point's module, read from the sources its `exports` entry is built from. */
const manifest = JSON.parse(readFileSync("package.json", "utf8")) as {
  exports: Record<string, string | { default: string }>;
};
const modules: Record<string, Record<string, Loose>> = {};
for (const [subpath, target] of Object.entries(manifest.exports)) {
  const built = typeof target === "string" ? target : target.default;
  if (!built.endsWith(".js")) continue;
  const source = built.replace(/^\.\/dist\//, "../../src/").replace(/\.js$/, ".ts");
  modules[subpath === "." ? "edgelimit" : `edgelimit/${subpath.slice(2)}`] = await import(source);
}
const m = (entry: string): Record<string, Loose> => modules[entry] as Record<string, Loose>;

const policy = definePolicy({ tiers: { anonymous: { global: 5 } } });
const store = memoryStore();
const limiter = m("edgelimit").createLimiter({ policy, store });

/** One function's options: valid ones, and the three mistakes made from them. */
interface Row {
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

const ROWS: readonly Row[] = [
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

/** Functions whose positional arguments are checked: a call with one of the wrong kind. */
const ARGUMENTS: readonly {
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
const NO_OPTIONS: Readonly<Record<string, Readonly<Record<string, string>>>> = {
  edgelimit: {
    ALGORITHMS: "a constant",
    LATE_GRACE_MS: "a constant",
    MAX_COST: "a constant",
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

/** Runs `call` and returns what it threw, which must be an EdgelimitError. */
function refusal(call: () => unknown): EdgelimitError {
  try {
    call();
  } catch (error) {
    expect(error, String(error)).toBeInstanceOf(EdgelimitError);
    return error as EdgelimitError;
  }
  throw new Error("accepted");
}

describe("every public function's options, as plain JavaScript passes them", () => {
  it("the table covers every export of every entry point", () => {
    expect(Object.keys(modules).sort()).toEqual(
      [
        "edgelimit",
        "edgelimit/cloudflare",
        "edgelimit/dynamodb",
        "edgelimit/dynamodb-fetch",
        "edgelimit/fetch",
        "edgelimit/lambda-edge",
        "edgelimit/node",
        "edgelimit/redis",
        "edgelimit/redis-rest",
      ].sort(),
    );
    for (const [entry, module] of Object.entries(modules)) {
      const covered = new Set([
        ...ROWS.filter((row) => row.entry === entry).flatMap((row) => row.exports),
        ...ARGUMENTS.filter((row) => row.entry === entry).map((row) => row.name),
        ...Object.keys(NO_OPTIONS[entry] ?? {}),
      ]);
      expect(
        Object.keys(module).filter((name) => !covered.has(name)),
        entry,
      ).toEqual([]);
    }
  });

  describe.each(ROWS)("$entry $name", (row) => {
    it(`a misspelt option: unknown, with the one meant (${row.misspelt[1]} for ${row.misspelt[0]})`, () => {
      const [right, wrong] = row.misspelt;
      const { [right]: value, ...rest } = row.valid;
      const error = refusal(() => row.call({ ...rest, [wrong]: value ?? 1 }));
      expect(error.code).toBe(row.code);
      expect(error.message).toMatch(new RegExp(`^${row.name}: `));
      expect(error.message).toContain(`unknown option \`${wrong}\`: did you mean \`${right}\`?`);
      expect(error.issues.map((issue) => issue.path)).toContain(wrong);
    });

    it.skipIf(row.required === undefined)(
      `a missing required option: named (${row.required})`,
      () => {
        const { [row.required as string]: _, ...rest } = row.valid;
        const error = refusal(() => row.call(rest));
        expect(error.code).toBe(row.code);
        expect(error.message).toMatch(
          new RegExp(`^${row.name}: \`${row.required}\` is required: `),
        );
      },
    );

    it(`an option of the wrong kind: named, with what it must be (${row.wrongKind[0]})`, () => {
      const [option, value, mustBe] = row.wrongKind;
      const error = refusal(() => row.call({ ...row.valid, [option]: value }));
      expect(error.code).toBe(row.code);
      expect(error.message).toContain(`${row.name}: \`${option}\` must be ${mustBe}`);
      // A string in the wrong place may be a secret: it is never echoed.
      if (typeof value === "string") {
        expect(error.message).toContain("got a string");
        expect(error.message).not.toContain(value);
      }
    });

    it.skipIf(row.required !== undefined || row.connects === true)(
      "no options at all: accepted",
      () => {
        expect(() => row.call(undefined)).not.toThrow();
      },
    );

    it("options that are not an object: refused, naming what is required", () => {
      const error = refusal(() => row.call("options"));
      expect(error.code).toBe(row.code);
      expect(error.message).toMatch(
        new RegExp(
          `^${row.name}: options must be an object${row.required === undefined ? "" : " with .*"}; got a string$`,
        ),
      );
    });
  });

  it.each(ARGUMENTS)("$entry $name: a positional argument of the wrong kind", (row) => {
    const error = refusal(row.call);
    expect(error.code).toBe(row.code);
    expect(error.message).toContain(row.message);
  });
});

describe("the mistakes a newcomer made (issue 33)", () => {
  it("createLimiter({ polcy }): the option meant, not a TypeError about identity", () => {
    const error = refusal(() => m("edgelimit").createLimiter({ polcy: policy, store }));
    expect(error.message).toBe(
      "createLimiter: 2 problems with its options\n  unknown option `polcy`: did you mean `policy`?\n  `policy` is required: a policy from definePolicy(input), loadPolicy(file) or parsePolicy(text)",
    );
  });

  it("createLimiter({ policy }) without a store: the store is named", () => {
    const error = refusal(() => m("edgelimit").createLimiter({ policy }));
    expect(error.message).toBe(
      "createLimiter: `store` is required: a store (memoryStore(), redisStore({ client }), dynamodbStore({ region }), ...)",
    );
  });

  it("nodeRateLimit({ limitr }) and ({ limiter, skipp }): refused, with the option meant", () => {
    expect(refusal(() => m("edgelimit/node").nodeRateLimit({ limitr: limiter })).message).toBe(
      "nodeRateLimit: 2 problems with its options\n  unknown option `limitr`: did you mean `limiter`?\n  `limiter` is required: a limiter from createLimiter({ policy, store })",
    );
    expect(
      refusal(() => m("edgelimit/node").nodeRateLimit({ limiter, skipp: () => true })).message,
    ).toBe("nodeRateLimit: unknown option `skipp`: did you mean `skip`?");
  });

  it("createRateLimit({ windowMs }): says that ours is window, a duration", () => {
    const error = refusal(() =>
      m("edgelimit").createRateLimit({ store, limit: 10, windowMs: 60_000 }),
    );
    expect(error.code).toBe("EL_BAD_OPTION");
    expect(error.message).toBe(
      'createRateLimit: 2 problems with its options\n  unknown option `windowMs`: express-rate-limit\'s `windowMs` is `window` here, a duration such as "60s" (not milliseconds)\n  `window` is required: a duration such as "60s", "1h" or "1mo"',
    );
  });

  it("nodeRateLimit({ windowMs, max }): the limits are the policy's", () => {
    const error = refusal(() =>
      m("edgelimit/node").nodeRateLimit({ limiter, windowMs: 60_000, max: 100 }),
    );
    expect(error.message).toContain(
      "unknown option `windowMs`: express-rate-limit's `windowMs` is a rule's `window` here",
    );
    expect(error.message).toContain(
      "unknown option `max`: express-rate-limit's `max` is a rule's `limit` here",
    );
  });
});
