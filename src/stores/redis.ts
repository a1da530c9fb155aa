/**
 * `edgelimit/redis`: counters in Redis or Redis Cluster (ioredis): one Lua script call applies
 * all of a request's counters (and, on a single node, all requests of the same tick).
 */
import { Cluster, Redis } from "ioredis";
import { timeoutAfterPendingIo } from "../core/deadline.js";
import { EdgelimitError } from "../core/errors.js";
import type {
  CounterSpec,
  CounterState,
  Store,
  StoreCallProgress,
  WindowSpec,
} from "../core/types.js";
import { CircuitBreaker, type CircuitBreakerOptions } from "./redis-breaker.js";
import { APPLY_COUNTERS_LUA, APPLY_COUNTERS_SHA } from "./redis-script.js";

export { CircuitBreaker, type CircuitBreakerOptions } from "./redis-breaker.js";
export { APPLY_COUNTERS_LUA, APPLY_COUNTERS_SHA } from "./redis-script.js";

export type RedisClient = Redis | Cluster;

export interface RedisStoreOptions {
  /**
   * An ioredis `Redis` or `Cluster` client, or a URL (`redis://host:port[/db]`,
   * `rediss://…`, `redis+cluster://host:port,host:port`). A client you pass stays yours: the
   * store never closes it. Configure it as `redisClientOptions()` does (no offline queue,
   * bounded retries, a command timeout), or a dead server can make calls wait.
   */
  readonly client: RedisClient | string;
  /** Prepended to every key (default `el:`). */
  readonly prefix?: string;
  /**
   * `server` (default): the script reads Redis `TIME`, so gateways with skewed clocks agree.
   * `caller`: the `now` the limiter passes; for simulations and tests that drive time.
   */
  readonly clock?: "server" | "caller";
  /** Circuit breaker settings, or `false` to turn it off. */
  readonly breaker?: CircuitBreakerOptions | false;
  /**
   * A call still unanswered after this long has failed, and counts as a failure for the
   * breaker (default 1000 ms). Measured like the decision budget: a reply already in this
   * process, waiting behind our own work, is read before the call is declared lost.
   */
  readonly timeoutMs?: number;
  /**
   * Single node only: requests that arrive in the same tick share one script call, up to this
   * many (default 64; 1 turns batching off). Each request is still applied atomically and in
   * order inside the script; the batch only saves per-call overhead in Node and in Redis.
   */
  readonly maxBatch?: number;
}

interface QueuedRequest {
  readonly keys: readonly string[];
  readonly args: readonly string[];
  readonly resolve: (states: CounterState[]) => void;
  readonly reject: (error: unknown) => void;
}

const DEFAULT_PREFIX = "el:";
const DEFAULT_MAX_BATCH = 64;
const DEFAULT_TIMEOUT_MS = 1000;
const FIELDS_PER_COUNTER = 5;
const ALGORITHM_CODES = {
  "fixed-window": "f",
  "sliding-window": "s",
  "token-bucket": "t",
} as const;

/**
 * Counters in Redis. Each key is `prefix + "{" + subject + "}" + "|namespace|scope"`: the
 * braces are a Cluster hash tag, so every counter of one subject lives in one slot and one
 * request is one script call on one node. On a single node all of a request's counters go in
 * one call whatever their subjects; on a Cluster, counters of different subjects (login keyed
 * by IP, api keyed by user) go to their slots as parallel calls, each atomic on its own.
 */
export class RedisStore implements Store {
  readonly name = "redis";
  readonly local = false;
  readonly client: RedisClient;
  readonly prefix: string;
  readonly breaker: CircuitBreaker | undefined;
  readonly #ownsClient: boolean;
  readonly #serverClock: boolean;
  readonly #isCluster: boolean;
  readonly #maxBatch: number;
  readonly #timeoutMs: number;
  #queue: QueuedRequest[] = [];
  /** Settles on the client's first connection (or its first failure); undefined after that. */
  #firstConnection: Promise<void> | undefined;
  /** Script calls sent to Redis since start (NOSCRIPT fallbacks included). */
  roundTrips = 0;
  /** The last connection error of a client the store owns (for health pages). */
  lastConnectionError: string | undefined;

  constructor(options: RedisStoreOptions) {
    if (typeof options.client === "string") {
      this.client = createRedisClient(options.client);
      this.#ownsClient = true;
      // Connection errors surface as failed calls (and the rules' fail modes); without a
      // listener ioredis would also print each reconnection attempt's error.
      this.client.on("error", this.#onClientError);
    } else {
      this.client = options.client;
      this.#ownsClient = false;
    }
    this.#isCluster = this.client instanceof Cluster;
    this.prefix = options.prefix ?? DEFAULT_PREFIX;
    this.#serverClock = (options.clock ?? "server") === "server";
    this.breaker = options.breaker === false ? undefined : new CircuitBreaker(options.breaker);
    const maxBatch = options.maxBatch ?? DEFAULT_MAX_BATCH;
    if (!Number.isInteger(maxBatch) || maxBatch < 1) {
      throw new EdgelimitError(
        "EL_BAD_ARGUMENT",
        `redisStore: maxBatch must be a whole number of at least 1; got ${maxBatch}`,
      );
    }
    this.#maxBatch = this.#isCluster ? 1 : maxBatch;
    const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) {
      throw new EdgelimitError(
        "EL_BAD_ARGUMENT",
        `redisStore: timeoutMs must be a positive number of milliseconds; got ${timeoutMs}`,
      );
    }
    this.#timeoutMs = timeoutMs;
    this.#firstConnection = this.client.status === "ready" ? undefined : this.#connected();
    // Settled here so that a first connection that fails is never an unhandled rejection.
    const connected = (): void => {
      this.#firstConnection = undefined;
    };
    this.#firstConnection?.then(connected, connected);
    // After every (re)connection, cache the script before traffic asks for it: a restarted
    // server would otherwise answer NOSCRIPT to each of the first calls.
    this.client.on("ready", this.#onReady);
  }

  readonly #onClientError = (error: Error): void => {
    this.lastConnectionError = error.message;
  };

  readonly #onReady = (): void => {
    this.#loadScript().catch(() => {
      // The first call falls back to EVAL instead.
    });
  };

  async #loadScript(): Promise<void> {
    const masters = this.client instanceof Cluster ? this.client.nodes("master") : [this.client];
    await Promise.all(masters.map((node) => node.script("LOAD", APPLY_COUNTERS_LUA)));
  }

  /**
   * Resolves once the client is connected and the script is cached on every master, so that
   * the first burst of requests does not each fall back to EVAL. The store fails fast until
   * the connection is up.
   */
  async ready(): Promise<void> {
    await this.#connected();
    await this.#loadScript();
  }

  #connected(): Promise<void> {
    const client = this.client;
    if (client.status === "ready") return Promise.resolve();
    return new Promise((resolve, reject) => {
      const onReady = (): void => {
        client.off("end", onEnd);
        resolve();
      };
      const onEnd = (): void => {
        client.off("ready", onReady);
        client.off("error", onEnd);
        reject(
          new EdgelimitError("EL_STORE_FAILED", "redis connection closed before it was ready"),
        );
      };
      client.once("ready", onReady);
      client.once("end", onEnd);
      client.once("error", onEnd);
    });
  }

  async apply(
    counters: readonly CounterSpec[],
    now: number,
    progress?: StoreCallProgress,
  ): Promise<CounterState[]> {
    if (counters.length === 0) return [];
    const first = this.#firstConnection;
    if (first !== undefined) {
      // A fresh process's first calls wait for its connection (the decision budget does not run
      // meanwhile); a connection that fails makes them fail as any call would.
      const connected = progress?.connecting();
      try {
        await first;
      } catch {
        // The call below fails at once on the unconnected client.
      } finally {
        connected?.();
      }
    }
    const breaker = this.breaker;
    if (breaker !== undefined && !breaker.tryAcquire()) {
      throw new EdgelimitError(
        "EL_STORE_FAILED",
        "redis circuit breaker is open after repeated failures; retrying shortly",
      );
    }
    const nowArgument = this.#serverClock ? "" : String(now);
    try {
      const states = this.#isCluster
        ? await this.#applyBySubject(counters, nowArgument)
        : await this.#applyGroup(counters, nowArgument);
      breaker?.recordSuccess();
      return states;
    } catch (error) {
      breaker?.recordFailure();
      if (error instanceof EdgelimitError) throw error;
      throw new EdgelimitError(
        "EL_STORE_FAILED",
        `redis store failed: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
  }

  /** The call's answer, or `EL_STORE_TIMEOUT` when none came within `timeoutMs` of sending it. */
  #answeredInTime<T>(call: Promise<T>): Promise<T> {
    return new Promise((resolve, reject) => {
      let settled = false;
      const cancel = timeoutAfterPendingIo(
        this.#timeoutMs,
        () => settled,
        () => {
          settled = true;
          reject(
            new EdgelimitError(
              "EL_STORE_TIMEOUT",
              `redis did not answer within ${this.#timeoutMs} ms`,
            ),
          );
        },
      );
      call.then(
        (reply) => {
          if (settled) return;
          settled = true;
          cancel();
          resolve(reply);
        },
        (error: unknown) => {
          if (settled) return;
          settled = true;
          cancel();
          reject(error);
        },
      );
    });
  }

  async close(): Promise<void> {
    this.client.off("ready", this.#onReady);
    if (!this.#ownsClient) return;
    this.client.off("error", this.#onClientError);
    try {
      await this.client.quit();
    } catch {
      this.client.disconnect();
    }
  }

  /** Redis key of a counter: the subject in braces is the Cluster hash tag. */
  redisKey(counter: CounterSpec): string {
    const rest = counter.key.startsWith(counter.subject)
      ? counter.key.slice(counter.subject.length)
      : `|${counter.key}`;
    return `${this.prefix}{${counter.subject}}${rest}`;
  }

  async #applyBySubject(
    counters: readonly CounterSpec[],
    nowArgument: string,
  ): Promise<CounterState[]> {
    const first = counters[0] as CounterSpec;
    if (counters.every((counter) => counter.subject === first.subject)) {
      return this.#applyGroup(counters, nowArgument);
    }
    const groups = new Map<string, number[]>();
    counters.forEach((counter, index) => {
      const members = groups.get(counter.subject);
      if (members === undefined) groups.set(counter.subject, [index]);
      else members.push(index);
    });
    const results: CounterState[] = new Array(counters.length);
    await Promise.all(
      [...groups.values()].map(async (indexes) => {
        const states = await this.#applyGroup(
          indexes.map((index) => counters[index] as CounterSpec),
          nowArgument,
        );
        indexes.forEach((index, position) => {
          results[index] = states[position] as CounterState;
        });
      }),
    );
    return results;
  }

  #applyGroup(counters: readonly CounterSpec[], nowArgument: string): Promise<CounterState[]> {
    const count = counters.length;
    const keys: string[] = new Array(count);
    const args: string[] = [nowArgument, String(count)];
    for (let i = 0; i < count; i++) {
      const counter = counters[i] as CounterSpec;
      keys[i] = this.redisKey(counter);
      args.push(
        ALGORITHM_CODES[counter.algorithm],
        String(counter.limit),
        windowArgument(counter.window),
        String(counter.cost),
        counter.mode === "observe" ? "o" : "e",
      );
    }
    if (this.#maxBatch === 1) {
      return this.#run(keys, ["1", ...args]).then((reply) => decodeReply(reply, 0, count));
    }
    return new Promise((resolve, reject) => {
      this.#queue.push({ keys, args, resolve, reject });
      if (this.#queue.length === 1) process.nextTick(() => this.#flush());
      else if (this.#queue.length >= this.#maxBatch) this.#flush();
    });
  }

  /** Sends the requests queued in this tick as one script call, in arrival order. */
  #flush(): void {
    const batch = this.#queue;
    if (batch.length === 0) return;
    this.#queue = [];
    const keys: string[] = [];
    const args: string[] = [String(batch.length)];
    for (const request of batch) {
      for (const key of request.keys) keys.push(key);
      for (const arg of request.args) args.push(arg);
    }
    this.#run(keys, args).then(
      (reply) => {
        let offset = 0;
        for (const request of batch) {
          try {
            request.resolve(decodeReply(reply, offset, request.keys.length));
          } catch (error) {
            request.reject(error);
          }
          offset += request.keys.length;
        }
      },
      (error: unknown) => {
        for (const request of batch) request.reject(error);
      },
    );
  }

  async #run(keys: string[], args: string[]): Promise<unknown> {
    this.roundTrips++;
    try {
      return await this.#answeredInTime(
        this.client.evalsha(APPLY_COUNTERS_SHA, keys.length, ...keys, ...args),
      );
    } catch (error) {
      if (!(error instanceof Error) || !error.message.startsWith("NOSCRIPT")) throw error;
      // A restarted or flushed server lost the script: EVAL runs it and caches it again.
      this.roundTrips++;
      return this.#answeredInTime(
        this.client.eval(APPLY_COUNTERS_LUA, keys.length, ...keys, ...args),
      );
    }
  }
}

function windowArgument(window: WindowSpec): string {
  return "ms" in window ? String(window.ms) : `m${window.months}`;
}

/** States of `count` counters starting at counter `offset` of a script reply. */
function decodeReply(reply: unknown, offset: number, count: number): CounterState[] {
  if (!Array.isArray(reply) || reply.length < (offset + count) * FIELDS_PER_COUNTER) {
    throw new EdgelimitError("EL_STORE_FAILED", "redis script returned an unexpected reply");
  }
  const states: CounterState[] = new Array(count);
  for (let i = 0; i < count; i++) {
    const at = (offset + i) * FIELDS_PER_COUNTER;
    const retryAfterMs = reply[at + 4] as number;
    states[i] = {
      allowed: reply[at] === 1,
      count: reply[at + 1] as number,
      remaining: reply[at + 2] as number,
      resetAt: reply[at + 3] as number,
      retryAfterMs: retryAfterMs < 0 ? Number.POSITIVE_INFINITY : retryAfterMs,
    };
  }
  return states;
}

/** Connection settings that never let a request wait on a dead server. */
export interface RedisConnectionTuning {
  /** Milliseconds to establish a connection (default 1000). */
  readonly connectTimeoutMs?: number;
  /** Longest pause between reconnection attempts (default 200 ms). */
  readonly maxReconnectDelayMs?: number;
}

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
  const maxReconnectDelayMs = tuning.maxReconnectDelayMs ?? 200;
  return {
    enableOfflineQueue: false,
    enableAutoPipelining: false,
    maxRetriesPerRequest: 1,
    connectTimeout: tuning.connectTimeoutMs ?? 1000,
    retryStrategy: (attempt: number) => Math.min(attempt * 50, maxReconnectDelayMs),
  };
}

/**
 * `redis://[user:password@]host:port[/db]` (or `rediss://` for TLS): one node.
 * `redis+cluster://host:port,host:port`: a Cluster, seeded from any of its nodes.
 */
export function createRedisClient(url: string, tuning: RedisConnectionTuning = {}): RedisClient {
  const options = redisClientOptions(tuning);
  if (url.startsWith("redis+cluster://") || url.startsWith("rediss+cluster://")) {
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
        "EL_BAD_ARGUMENT",
        `redis cluster URL must list at least one node, as in redis+cluster://10.0.0.1:6379,10.0.0.2:6379; got "${url}"`,
      );
    }
    const { retryStrategy, enableOfflineQueue, enableAutoPipelining: _, ...perNode } = options;
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
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new EdgelimitError(
      "EL_BAD_ARGUMENT",
      `redis URL must look like redis://host:port[/db] or redis+cluster://host:port,host:port; got "${url}"`,
    );
  }
  if (parsed.protocol !== "redis:" && parsed.protocol !== "rediss:") {
    throw new EdgelimitError(
      "EL_BAD_ARGUMENT",
      `redis URL must start with redis://, rediss:// or redis+cluster://; got "${url}"`,
    );
  }
  const dbPart = parsed.pathname.replace(/^\//, "");
  const db = dbPart === "" ? 0 : Number(dbPart);
  if (!Number.isInteger(db) || db < 0) {
    throw new EdgelimitError(
      "EL_BAD_ARGUMENT",
      `redis URL database must be a whole number (redis://host:port/2); got "${dbPart}"`,
    );
  }
  return new Redis({
    ...options,
    host: parsed.hostname.replace(/^\[|\]$/g, "") || "127.0.0.1",
    port: parsed.port === "" ? 6379 : Number(parsed.port),
    db,
    ...(parsed.username === "" ? {} : { username: decodeURIComponent(parsed.username) }),
    ...(parsed.password === "" ? {} : { password: decodeURIComponent(parsed.password) }),
    ...(parsed.protocol === "rediss:" ? { tls: {} } : {}),
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
      "EL_BAD_ARGUMENT",
      `redis cluster URL has a bad node "${part}" in "${url}"`,
    );
  }
  return { host, port: match[2] === undefined ? 6379 : Number(match[2]) };
}

/** A Redis store from options (client or URL). */
export function redisStore(options: RedisStoreOptions): RedisStore {
  return new RedisStore(options);
}

/** A Redis store that owns its client, for `edgelimit serve --store redis://…`. */
export function redisStoreFromUrl(url: string): RedisStore {
  return new RedisStore({ client: url });
}
