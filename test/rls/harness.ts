/**
 * Test harness for `edgelimit rls`: the real CLI in a child process on loopback (ports chosen by
 * the system, read from its start line), and gRPC clients that are not ours: `@grpc/grpc-js`
 * with Envoy's own `.proto` files read by protobufjs (as `@grpc/grpc-js-xds` ships them), and
 * Debian's python3-grpcio with the same files compiled by protoc (python-client.py).
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { existsSync, mkdtempSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import * as grpc from "@grpc/grpc-js";
import protobuf from "protobufjs";
import { cliEntry } from "../support/cli-entry.js";

const run = promisify(execFile);
const require = createRequire(import.meta.url);

export interface RlsProcess {
  readonly child: ChildProcess;
  readonly grpcPort: number;
  readonly httpPort: number;
  readonly adminUrl: string;
  output(): string;
  /** JSON log lines printed so far. */
  logLines(): Record<string, unknown>[];
  /** SIGTERM, then the exit code. */
  stop(): Promise<number | null>;
}

/**
 * `edgelimit rls ARGS` on 127.0.0.1: from dist/ when it is newer than every file under src/,
 * else from src through tsx (cli-entry.ts).
 */
export async function startRls(
  args: readonly string[],
  options: { readonly env?: Readonly<Record<string, string>> } = {},
): Promise<RlsProcess> {
  const child = spawn(
    process.execPath,
    [
      ...cliEntry(),
      "rls",
      "--grpc-port",
      "0",
      "--http-port",
      "0",
      "--admin-port",
      "0",
      "--host",
      "127.0.0.1",
      ...args,
    ],
    { env: { ...cleanEnv(), ...options.env }, stdio: ["ignore", "pipe", "pipe"] },
  );
  let output = "";
  const capture = (chunk: Buffer) => {
    output += chunk.toString("utf8");
  };
  child.stdout?.on("data", capture);
  child.stderr?.on("data", capture);
  const logLines = () =>
    output
      .split("\n")
      .filter((line) => line.startsWith("{"))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
  const started = await new Promise<Record<string, unknown>>((resolve, reject) => {
    const deadline = setTimeout(
      () => reject(new Error(`rls did not start in 20 s; output:\n${output}`)),
      20_000,
    );
    const poll = setInterval(() => {
      const line = logLines().find((entry) => entry.msg === "rate limit service started");
      if (line !== undefined || child.exitCode !== null) {
        clearInterval(poll);
        clearTimeout(deadline);
        if (line === undefined) reject(new Error(`rls exited ${child.exitCode}:\n${output}`));
        else resolve(line);
      }
    }, 25);
  });
  return {
    child,
    grpcPort: started.grpcPort as number,
    httpPort: started.httpPort as number,
    adminUrl: started.admin as string,
    output: () => output,
    logLines,
    stop: async () => {
      if (child.exitCode !== null) return child.exitCode;
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      const code = await new Promise<number | null>((resolve) =>
        child.once("exit", (exitCode) => resolve(exitCode)),
      );
      clearTimeout(timer);
      return code;
    },
  };
}

/** The environment without envoyproxy/ratelimit's variables, which would change what rls does. */
export function cleanEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (value === undefined || /^(RUNTIME_|REDIS_|PORT$|GRPC_|HOST$|SHADOW_MODE)/.test(name))
      continue;
    env[name] = value;
  }
  return env;
}

/** Where `@grpc/grpc-js-xds` keeps Envoy's protos and their imports. */
export function protoIncludeDirs(): string[] {
  const xds = dirname(require.resolve("@grpc/grpc-js-xds/package.json"));
  const health = dirname(require.resolve("grpc-health-check/package.json"));
  return [
    join(xds, "deps/envoy-api"),
    join(xds, "deps/googleapis"),
    join(xds, "deps/protoc-gen-validate"),
    join(xds, "deps/xds"),
    join(health, "proto"),
  ];
}

/**
 * Envoy's rls.proto and gRPC's health.proto, read by protobufjs. The protos `@grpc/grpc-js-xds`
 * ships predate the descriptor's own `hits_addend` (field 3, a UInt64Value, added in Envoy
 * 1.34): it is added here with upstream's number and type.
 */
export function upstreamRoot(): protobuf.Root {
  // protobufjs knows the common google/protobuf types, and ships descriptor.proto beside them.
  const includes = [...protoIncludeDirs(), dirname(require.resolve("protobufjs/package.json"))];
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => {
    for (const dir of includes) {
      const path = join(dir, target);
      if (existsSync(path)) return path;
    }
    return target;
  };
  root.loadSync(["envoy/service/ratelimit/v3/rls.proto", "health/v1/health.proto"], {
    keepCase: true,
  });
  const descriptor = root.lookupType("envoy.extensions.common.ratelimit.v3.RateLimitDescriptor");
  if (descriptor.fields.hits_addend === undefined) {
    descriptor.add(new protobuf.Field("hits_addend", 3, "google.protobuf.UInt64Value"));
  }
  root.resolveAll();
  return root;
}

const SHOULD_RATE_LIMIT = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

/** A call's outcome, shaped the same whichever client made it (see `normalize`). */
export interface CallResult {
  readonly error?: { readonly code: string; readonly details: string };
  readonly overall_code?: string;
  readonly statuses?: {
    readonly code: string;
    readonly current_limit?: {
      readonly requests_per_unit: number;
      readonly unit: string;
      readonly name: string;
    };
    readonly limit_remaining: number;
    /** Whole seconds, rounded up. */
    readonly reset_seconds?: number;
  }[];
  readonly response_headers_to_add?: Record<string, string>;
  readonly request_headers_to_add?: Record<string, string>;
}

export interface RlsClient {
  shouldRateLimit(request: Record<string, unknown>): Promise<CallResult>;
  health(service?: string): Promise<string>;
  close(): void;
}

/** `@grpc/grpc-js` with protobufjs's encoding of the upstream messages. */
export function grpcJsClient(port: number, root = upstreamRoot()): RlsClient {
  const Request = root.lookupType("envoy.service.ratelimit.v3.RateLimitRequest");
  const Response = root.lookupType("envoy.service.ratelimit.v3.RateLimitResponse");
  const HealthRequest = root.lookupType("grpc.health.v1.HealthCheckRequest");
  const HealthResponse = root.lookupType("grpc.health.v1.HealthCheckResponse");
  const method = (path: string, request: protobuf.Type, response: protobuf.Type) => ({
    path,
    requestStream: false,
    responseStream: false,
    requestSerialize: (value: Record<string, unknown>) =>
      Buffer.from(request.encode(request.fromObject(value)).finish()),
    requestDeserialize: (bytes: Buffer) => request.decode(bytes),
    responseSerialize: (value: protobuf.Message) => Buffer.from(response.encode(value).finish()),
    responseDeserialize: (bytes: Buffer) =>
      response.toObject(response.decode(bytes), { enums: String, longs: Number, defaults: false }),
  });
  const Client = grpc.makeGenericClientConstructor(
    {
      ShouldRateLimit: method(SHOULD_RATE_LIMIT, Request, Response),
      Check: method("/grpc.health.v1.Health/Check", HealthRequest, HealthResponse),
    },
    "RateLimit",
  );
  const client = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  type Unary = (
    request: Record<string, unknown>,
    options: grpc.CallOptions,
    callback: (error: grpc.ServiceError | null, response: Record<string, unknown>) => void,
  ) => void;
  const call = (name: "ShouldRateLimit" | "Check", request: Record<string, unknown>) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const method = Reflect.get(client, name) as Unary;
      method.call(client, request, { deadline: Date.now() + 10_000 }, (error, response) =>
        error === null ? resolve(response) : reject(error),
      );
    });
  return {
    shouldRateLimit: async (request) => {
      try {
        return normalize(await call("ShouldRateLimit", request));
      } catch (error) {
        const failure = error as grpc.ServiceError;
        return {
          error: {
            code: grpc.status[failure.code] ?? String(failure.code),
            details: failure.details,
          },
        };
      }
    },
    health: async (service = "") => {
      const response = await call("Check", { service });
      return String(response.status ?? "UNKNOWN");
    },
    close: () => client.close(),
  };
}

/**
 * The same calls through Debian's python3-grpcio, with message classes built from the same
 * `.proto` files by protoc: one process runs them in order and prints their outcomes.
 */
export async function pythonCalls(
  port: number,
  requests: readonly Record<string, unknown>[],
): Promise<CallResult[]> {
  const descriptors = await descriptorSet();
  const python = existsSync("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  const child = spawn(
    python,
    [join(import.meta.dirname, "python-client.py"), descriptors, String(port)],
    {
      stdio: ["pipe", "pipe", "pipe"],
    },
  );
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => {
    stdout += chunk.toString("utf8");
  });
  child.stderr.on("data", (chunk: Buffer) => {
    stderr += chunk.toString("utf8");
  });
  child.stdin.end(JSON.stringify(requests.map(protoJson)));
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  if (code !== 0) throw new Error(`python client exited ${code}:\n${stderr}`);
  return (JSON.parse(stdout) as Record<string, unknown>[]).map((result) =>
    "error" in result ? (result as CallResult) : normalize(result),
  );
}

/**
 * A request as protobuf's JSON mapping writes it (what Python parses): a `UInt64Value` is its
 * bare number there, where protobufjs takes `{ value }`.
 */
function protoJson(request: Record<string, unknown>): Record<string, unknown> {
  const descriptors = (request.descriptors ?? []) as Record<string, unknown>[];
  return {
    ...request,
    descriptors: descriptors.map((descriptor) => {
      const hits = descriptor.hits_addend as { value: number } | undefined;
      return hits === undefined ? descriptor : { ...descriptor, hits_addend: hits.value };
    }),
  };
}

let compiled: Promise<string> | undefined;

/** rls.proto and health.proto with their imports, compiled by protoc into a descriptor set. */
function descriptorSet(): Promise<string> {
  compiled ??= (async () => {
    const out = join(mkdtempSync(join(tmpdir(), "edgelimit-protos-")), "rls.pb");
    await run("protoc", [
      ...protoIncludeDirs().map((dir) => `-I${dir}`),
      "-I/usr/include",
      "--include_imports",
      `--descriptor_set_out=${out}`,
      "envoy/service/ratelimit/v3/rls.proto",
      "health/v1/health.proto",
    ]);
    return out;
  })();
  return compiled;
}

/** Both clients' outcomes in one shape: snake_case names, enum names, whole seconds to reset. */
export function normalize(response: Record<string, unknown>): CallResult {
  const pick = (object: Record<string, unknown>, snake: string): unknown => {
    const camel = snake.replace(/_([a-z])/g, (_match, letter: string) => letter.toUpperCase());
    return object[snake] ?? object[camel];
  };
  const headers = (value: unknown): Record<string, string> | undefined => {
    const list = (value ?? []) as { key: string; value: string }[];
    if (list.length === 0) return undefined;
    return Object.fromEntries(list.map((header) => [header.key.toLowerCase(), header.value]));
  };
  const statuses = ((pick(response, "statuses") ?? []) as Record<string, unknown>[]).map(
    (status) => {
      const limit = pick(status, "current_limit") as Record<string, unknown> | undefined;
      const reset = pick(status, "duration_until_reset") as
        | Record<string, unknown>
        | string
        | undefined;
      const seconds =
        reset === undefined
          ? undefined
          : typeof reset === "string"
            ? Number(reset.replace(/s$/, ""))
            : Number(reset.seconds ?? 0) + Number(reset.nanos ?? 0) / 1e9;
      return {
        code: String(pick(status, "code") ?? "UNKNOWN"),
        ...(limit === undefined
          ? {}
          : {
              current_limit: {
                requests_per_unit: Number(pick(limit, "requests_per_unit") ?? 0),
                unit: String(pick(limit, "unit") ?? "UNKNOWN"),
                name: String(pick(limit, "name") ?? ""),
              },
            }),
        limit_remaining: Number(pick(status, "limit_remaining") ?? 0),
        ...(seconds === undefined ? {} : { reset_seconds: Math.ceil(seconds) }),
      };
    },
  );
  const result: Record<string, unknown> = {
    overall_code: String(pick(response, "overall_code") ?? "UNKNOWN"),
    statuses,
  };
  const responseHeaders = headers(pick(response, "response_headers_to_add"));
  if (responseHeaders !== undefined) result.response_headers_to_add = responseHeaders;
  const requestHeaders = headers(pick(response, "request_headers_to_add"));
  if (requestHeaders !== undefined) result.request_headers_to_add = requestHeaders;
  return result as CallResult;
}
