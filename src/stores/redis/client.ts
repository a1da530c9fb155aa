/**
 * Redis clients for a rate limiter: ioredis options that never let a request wait on a dead
 * server, and the clients a URL names. ioredis parses `redis://` and `rediss://` itself; the
 * Cluster form (`redis+cluster://`), which ioredis does not know, is read here.
 */
import { Cluster, Redis } from "ioredis";
import { EdgelimitError } from "../../core/errors.js";
import { checkArgument, checkOptions, type OptionsShape } from "../../core/options.js";
import { redact } from "../redact.js";
import { parseStoreUrl } from "../store-url.js";

export type RedisClient = Redis | Cluster;

/** Connection settings that never let a request wait on a dead server. */
export interface RedisConnectionTuning {
  /** Milliseconds to establish a connection (default 1000). */
  readonly connectTimeoutMs?: number;
  /** Longest pause between reconnection attempts (default 200 ms). */
  readonly maxReconnectDelayMs?: number;
}

const TUNING_OPTIONS = {
  connectTimeoutMs: "number",
  maxReconnectDelayMs: "number",
} satisfies OptionsShape<RedisConnectionTuning>;

/**
 * ioredis options for a rate limiter: no offline queue (a command on a dead connection fails
 * at once instead of queueing without bound), one retry per command, a connect timeout, quick
 * reconnection. No command timeout: ioredis's is a plain timer, which a busy process runs
 * before it reads the reply that arrived in time; the store bounds each call itself
 * (`RedisStoreOptions.timeoutMs`). No auto-pipelining on a single node: the store already sends a
 * tick's requests as one call, and a second layer of deferral only costs time. A Cluster
 * client turns it on, since the store does not batch across slots.
 */
export function redisClientOptions(tuning: RedisConnectionTuning = {}) {
  if (typeof EDGELIMIT_BUNDLE === "undefined")
    checkOptions("redisClientOptions", tuning, TUNING_OPTIONS, { code: "EL_STORE_OPTION" });
  const maxReconnectDelayMs = tuning.maxReconnectDelayMs ?? 200;
  return {
    enableOfflineQueue: false,
    enableAutoPipelining: false,
    maxRetriesPerRequest: 1,
    connectTimeout: tuning.connectTimeoutMs ?? 1000,
    // A connection dropped because it stopped answering (a half-open socket) is closed at once,
    // not after ioredis's default 2 s wait for the other side's FIN, which never comes.
    disconnectTimeout: 100,
    retryStrategy: (attempt: number) => Math.min(attempt * 50, maxReconnectDelayMs),
  };
}

/**
 * `redis://[user:password@]host:port[/db]` (or `rediss://` for TLS): one node.
 * `redis+cluster://host:port,host:port` (or `rediss+cluster://`): a Cluster, seeded from any of
 * its nodes.
 */
export function createRedisClient(url: string, tuning: RedisConnectionTuning = {}): RedisClient {
  if (typeof EDGELIMIT_BUNDLE === "undefined") {
    checkArgument("createRedisClient", "the URL", url, "string", "EL_STORE_URL");
    checkOptions("createRedisClient", tuning, TUNING_OPTIONS, { code: "EL_STORE_OPTION" });
  }
  if (url.startsWith("redis+cluster://") || url.startsWith("rediss+cluster://")) {
    return createClusterClient(url, tuning);
  }
  checkSingleNodeUrl(url);
  return new Redis(url, redisClientOptions(tuning));
}

/** What ioredis would take without complaint but we refuse, with a message saying what to write. */
function checkSingleNodeUrl(url: string): void {
  const parsed = parseStoreUrl(
    url,
    "redis URL must look like redis://host:port[/db] or redis+cluster://host:port,host:port",
  );
  if (parsed.protocol !== "redis:" && parsed.protocol !== "rediss:") {
    throw new EdgelimitError(
      "EL_STORE_URL",
      `redis URL must start with redis://, rediss:// or redis+cluster://; got "${redact(url)}"`,
    );
  }
  // ioredis would quietly connect to 127.0.0.1: a missing host is a mistake, not a default.
  if (parsed.hostname === "") {
    throw new EdgelimitError(
      "EL_STORE_URL",
      `redis URL has no host: write redis://HOST:PORT (for a local server, redis://127.0.0.1:6379); got "${redact(url)}"`,
    );
  }
  // ioredis would connect to database NaN or -1 and fail on SELECT at the first call.
  const db = parsed.pathname.replace(/^\//, "");
  if (db !== "" && !/^\d+$/.test(db)) {
    throw new EdgelimitError(
      "EL_STORE_URL",
      `redis URL database must be a whole number (redis://host:port/2); got "${db}"`,
    );
  }
}

function createClusterClient(url: string, tuning: RedisConnectionTuning): Cluster {
  const tls = url.startsWith("rediss+");
  const rest = url.slice(url.indexOf("://") + 3);
  const { credentials, hosts } = splitCredentials(rest);
  const nodes = hosts
    .split("/")[0]
    ?.split(",")
    .filter((part) => part.length > 0)
    .map((part) => parseHostPort(part, url));
  if (nodes === undefined || nodes.length === 0) {
    throw new EdgelimitError(
      "EL_STORE_URL",
      `redis cluster URL must list at least one node, as in redis+cluster://10.0.0.1:6379,10.0.0.2:6379; got "${redact(url)}"`,
    );
  }
  const {
    retryStrategy,
    enableOfflineQueue,
    enableAutoPipelining: _,
    ...perNode
  } = redisClientOptions(tuning);
  return new Cluster(nodes, {
    enableOfflineQueue,
    enableAutoPipelining: true,
    clusterRetryStrategy: retryStrategy,
    redisOptions: {
      ...perNode,
      ...credentials,
      ...(tls ? { tls: {} } : {}),
    },
  });
}

function splitCredentials(rest: string): {
  credentials: { username?: string; password?: string };
  hosts: string;
} {
  const at = rest.lastIndexOf("@");
  if (at === -1) return { credentials: {}, hosts: rest };
  const userInfo = rest.slice(0, at);
  const colon = userInfo.indexOf(":");
  const username = decodeURIComponent(colon === -1 ? userInfo : userInfo.slice(0, colon));
  const password = colon === -1 ? "" : decodeURIComponent(userInfo.slice(colon + 1));
  return {
    credentials: {
      ...(username === "" ? {} : { username }),
      ...(password === "" ? {} : { password }),
    },
    hosts: rest.slice(at + 1),
  };
}

function parseHostPort(part: string, url: string): { host: string; port: number } {
  const match = /^\[?([^\]]*?)\]?(?::(\d+))?$/.exec(part);
  const host = match?.[1];
  if (match === null || host === undefined || host === "") {
    throw new EdgelimitError(
      "EL_STORE_URL",
      `redis cluster URL has a bad node "${part}" in "${redact(url)}"`,
    );
  }
  return { host, port: match[2] === undefined ? 6379 : Number(match[2]) };
}
