import { Cluster } from "ioredis";
import { EdgelimitError } from "../../core/errors.js";
import type { CounterSpec, CounterState, Store, StoreCallProgress } from "../../core/types.js";
import { TickBatch } from "./batch.js";
import { CircuitBreaker, type CircuitBreakerOptions } from "./breaker.js";
import { createRedisClient, type RedisClient } from "./client.js";
import { applyBySubject } from "./cluster.js";
import { decodeReply, encodeRequest } from "./encoding.js";
import { ScriptRunner } from "./runner.js";
import { answeredInTime } from "./timeout.js";

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

const DEFAULT_PREFIX = "el:";
const DEFAULT_MAX_BATCH = 64;
const DEFAULT_TIMEOUT_MS = 1000;

/**
 * Counters in Redis. Each key is `prefix + "{" + subject + "}" + "|namespace|scope"`: the
 * braces are a Cluster hash tag, so every counter of one subject lives in one slot and one
 * request is one script call on one node. On a single node all of a request's counters go in
 * one call whatever their subjects (batched per tick, batch.ts); on a Cluster, counters of
 * different subjects go to their slots as parallel calls, each atomic on its own (cluster.ts).
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
  readonly #timeoutMs: number;
  /** Undefined when batching is off (a Cluster, or `maxBatch: 1`). */
  readonly #batch: TickBatch | undefined;
  readonly #runner: ScriptRunner;
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
    this.#runner = new ScriptRunner(this.client, () => {
      this.roundTrips++;
    });
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
    this.#batch =
      this.#isCluster || maxBatch === 1
        ? undefined
        : new TickBatch(maxBatch, (keys, args) => this.#run(keys, args));
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

  #loadScript(): Promise<void> {
    return this.#runner.load();
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
        ? await applyBySubject(counters, (group) => this.#applyGroup(group, nowArgument))
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

  /** Deletes the counters' keys (one DEL per key: a Cluster routes each to its slot). */
  async reset(counters: readonly CounterSpec[]): Promise<void> {
    await Promise.all(counters.map((counter) => this.client.del(this.redisKey(counter))));
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

  #applyGroup(counters: readonly CounterSpec[], nowArgument: string): Promise<CounterState[]> {
    const request = encodeRequest(counters, nowArgument, (counter) => this.redisKey(counter));
    if (this.#batch !== undefined) return this.#batch.submit(request);
    return this.#run(request.keys, request.args).then((reply) =>
      decodeReply(reply, 0, counters.length),
    );
  }

  /** The script call (runner.ts), bounded by `timeoutMs`. */
  #run(keys: string[], args: string[]): Promise<unknown> {
    return answeredInTime(this.#runner.run(keys, args), this.#timeoutMs);
  }
}

/** A Redis store from options (client or URL). */
export function redisStore(options: RedisStoreOptions): RedisStore {
  return new RedisStore(options);
}

/** A Redis store that owns its client, for `edgelimit serve --store redis://…`. */
export function redisStoreFromUrl(url: string): RedisStore {
  return new RedisStore({ client: url });
}
