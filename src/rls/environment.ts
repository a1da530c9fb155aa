/**
 * envoyproxy/ratelimit's environment variables that say where the configuration is, which Redis
 * to count in and which ports to listen on, read so that a deployment can swap the image and
 * keep its manifest. A flag on the command line wins over its variable. Variables for what
 * edgelimit does not do (memcached, Sentinel, a second Redis for per-second limits, xDS
 * configuration, unix sockets) are refused with a message, not ignored: a manifest that relies
 * on them would otherwise count somewhere else than its owner thinks.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { EdgelimitError } from "../core/errors.js";
import type { ConfigDecideOptions } from "./config-decide.js";

export type Environment = Readonly<Record<string, string | undefined>>;

/** What the variables say; each field is undefined where they say nothing. */
export interface RlsEnvironment {
  /** RUNTIME_ROOT / RUNTIME_SUBDIRECTORY / RUNTIME_APPDIRECTORY, when that directory exists. */
  readonly configPath: string | undefined;
  /** REDIS_URL with REDIS_TYPE, REDIS_AUTH and REDIS_TLS, as a `--store` URL. */
  readonly storeUrl: string | undefined;
  readonly httpPort: string | undefined;
  readonly grpcPort: string | undefined;
  readonly httpHost: string | undefined;
  readonly grpcHost: string | undefined;
  readonly globalShadow: boolean;
  readonly mergeDomains: boolean;
  readonly limitHeaders: ConfigDecideOptions["limitHeaders"];
  /** Variables read but with no effect here, in words for the log. */
  readonly notes: readonly string[];
}

const DEFAULT_RUNTIME_ROOT = "/srv/runtime_data/current";

export function readEnvironment(env: Environment): RlsEnvironment {
  const notes: string[] = [];
  refuse(
    env,
    "CONFIG_TYPE",
    (value) => value.toUpperCase() !== "FILE",
    "only FILE is supported (the configuration from --config or RUNTIME_ROOT); xDS configuration (GRPC_XDS_SOTW) is not",
  );
  refuse(
    env,
    "BACKEND_TYPE",
    (value) => value.toLowerCase() !== "redis",
    "edgelimit rls counts in Redis (REDIS_URL or --store redis://...), DynamoDB or memory (--store); memcached is not supported",
  );
  refuse(
    env,
    "REDIS_TYPE",
    (value) => !["single", "cluster"].includes(value.toLowerCase()),
    "SINGLE and CLUSTER are supported; for Sentinel, point --store at the current master",
  );
  if (isTrue(env.REDIS_PERSECOND)) {
    notes.push(
      "REDIS_PERSECOND is set: per-second limits count in REDIS_URL with every other limit (one store call per request)",
    );
  }
  for (const name of ["RUNTIME_WATCH_ROOT", "RUNTIME_IGNOREDOTFILES"]) {
    if (env[name] !== undefined)
      notes.push(
        `${name} has no effect: the configuration directory is always watched, and names starting with a dot are always skipped`,
      );
  }
  for (const name of [
    "DEBUG_HOST",
    "DEBUG_PORT",
    "PROMETHEUS_ADDR",
    "USE_PROMETHEUS",
    "USE_STATSD",
  ]) {
    if (env[name] !== undefined)
      notes.push(
        `${name} has no effect: metrics are on the admin listener (--admin-port, on 127.0.0.1) at /metrics`,
      );
  }
  return {
    configPath: configPathOf(env),
    storeUrl: storeUrlOf(env),
    httpPort: nonEmpty(env.PORT),
    grpcPort: nonEmpty(env.GRPC_PORT),
    httpHost: nonEmpty(env.HOST),
    grpcHost: nonEmpty(env.GRPC_HOST),
    globalShadow: isTrue(env.SHADOW_MODE),
    mergeDomains: isTrue(env.MERGE_DOMAIN_CONFIG),
    limitHeaders: isTrue(env.LIMIT_RESPONSE_HEADERS_ENABLED)
      ? {
          limit: (nonEmpty(env.LIMIT_LIMIT_HEADER) ?? "RateLimit-Limit").toLowerCase(),
          remaining: (nonEmpty(env.LIMIT_REMAINING_HEADER) ?? "RateLimit-Remaining").toLowerCase(),
          reset: (nonEmpty(env.LIMIT_RESET_HEADER) ?? "RateLimit-Reset").toLowerCase(),
        }
      : undefined,
    notes,
  };
}

/**
 * envoyproxy/ratelimit reads every file under RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY
 * (by default /srv/runtime_data/current/config). Undefined when that directory does not exist
 * and RUNTIME_ROOT was not set; an explicit RUNTIME_ROOT that does not exist is an error later,
 * when it is read.
 */
function configPathOf(env: Environment): string | undefined {
  const root = nonEmpty(env.RUNTIME_ROOT);
  const path = join(
    root ?? DEFAULT_RUNTIME_ROOT,
    nonEmpty(env.RUNTIME_SUBDIRECTORY) ?? "",
    nonEmpty(env.RUNTIME_APPDIRECTORY) ?? "config",
  );
  return root !== undefined || existsSync(path) ? path : undefined;
}

/**
 * REDIS_URL is `host:port` (several, comma-separated, for a Cluster), or a `redis://` URL;
 * REDIS_AUTH is `password` or `user:password`; REDIS_TLS turns TLS on.
 */
function storeUrlOf(env: Environment): string | undefined {
  const url = nonEmpty(env.REDIS_URL);
  if (url === undefined) return undefined;
  if (/^rediss?(\+cluster)?:\/\//i.test(url)) return url;
  if (url.startsWith("/") || (env.REDIS_SOCKET_TYPE ?? "").toLowerCase() === "unix") {
    throw new EdgelimitError(
      "EL_CLI_ARGUMENT",
      `REDIS_URL ${url} is a unix socket (REDIS_SOCKET_TYPE=unix, the default of envoyproxy/ratelimit); edgelimit rls connects over TCP: set REDIS_SOCKET_TYPE=tcp and REDIS_URL=host:port`,
    );
  }
  const cluster = (env.REDIS_TYPE ?? "").toLowerCase() === "cluster";
  const scheme = `${isTrue(env.REDIS_TLS) ? "rediss" : "redis"}${cluster ? "+cluster" : ""}://`;
  const auth = nonEmpty(env.REDIS_AUTH);
  const credentials =
    auth === undefined
      ? ""
      : `${auth.includes(":") ? auth.split(":").map(encodeURIComponent).join(":") : `:${encodeURIComponent(auth)}`}@`;
  return `${scheme}${credentials}${url}`;
}

function refuse(
  env: Environment,
  name: string,
  unsupported: (value: string) => boolean,
  message: string,
): void {
  const value = nonEmpty(env[name]);
  if (value !== undefined && unsupported(value)) {
    throw new EdgelimitError("EL_CLI_ARGUMENT", `${name}=${value}: ${message}`);
  }
}

function isTrue(value: string | undefined): boolean {
  return value !== undefined && ["true", "1", "t"].includes(value.trim().toLowerCase());
}

function nonEmpty(value: string | undefined): string | undefined {
  const trimmed = value?.trim();
  return trimmed === undefined || trimmed === "" ? undefined : trimmed;
}
