import { Cluster, type Redis } from "ioredis";
import type { Scheduler } from "../../core/deadline.js";
import { EdgelimitError } from "../../core/errors.js";
import { checkArgument, checkOptions } from "../../core/options.js";
import { ResetWatch } from "../../core/reset-watch.js";
import type {
  CounterSpec,
  CounterState,
  ForgetsBlocks,
  ResetFollower,
  ResetsSince,
  Store,
  StoreCallProgress,
  StoreStatus,
  StoreTraits,
} from "../../core/types.js";
import type { CircuitBreaker, CircuitBreakerOptions } from "../remote/breaker.js";
import { answeredInTime } from "../remote/call-timeout.js";
import { ConnectionGate } from "../remote/connection-gate.js";
import { RemoteGuard } from "../remote/guard.js";
import { statusOf } from "../remote/health.js";
import { TickBatch } from "./batch.js";
import { BlindCounting } from "./blind-counting.js";
import { createRedisClient, type RedisClient } from "./client.js";
import { applyBySubject } from "./cluster.js";
import { decodeReply, encodeRequest, redisKeyOf } from "./encoding.js";
import { onlyFixedWindows, resetKeysOf } from "./fixed-windows.js";
import { scriptStoreSettings } from "./options.js";
import { ioredisCommands, RedisOverrides } from "./overrides.js";
import { refusesCall } from "./refusal.js";
import { resetLogKeys } from "./reset-log.js";
import { appendResetLog, readResetLog } from "./reset-log-calls.js";
import { ScriptRunner } from "./runner.js";
import { ServerClock } from "./server-clock.js";
import { keySlot } from "./slot.js";
import { type RedisStoreOptions, redisStoreShape } from "./store-options.js";

export type { RedisStoreOptions } from "./store-options.js";

/** Cluster masters whose breakers are kept; a Cluster larger than this shares the rest. */
const MAX_NODE_GUARDS = 1024;

/**
 * Counters in Redis. Each key is `prefix + "{" + subject + "}" + "|namespace|scope"`: the
 * braces are a Cluster hash tag, so every counter of one subject lives in one slot and one
 * request is one script call on one node. On a single node all of a request's counters go in
 * one call whatever their subjects (batched per turn of the event loop, batch.ts); on a Cluster, counters of
 * different subjects go to their slots as parallel calls, each atomic on its own (cluster.ts).
 * Every call goes through the remote-store kit (`stores/remote/`): the connection gate, a
 * circuit breaker per node, and a PING before the call that probes an open circuit.
 */
export class RedisStore implements Store {
  readonly name = "redis";
  readonly traits: StoreTraits = { status: () => this.status() };
  readonly client: RedisClient;
  readonly prefix: string;
  readonly #ownsClient: boolean;
  readonly #serverClock: boolean;
  readonly #isCluster: boolean;
  readonly #timeoutMs: number;
  readonly #breakerOptions: CircuitBreakerOptions | false | undefined;
  /** Undefined when batching is off (a Cluster, or `maxBatch: 1`). */
  readonly #batch: TickBatch | undefined;
  /** Fixed windows counted without the script. */
  readonly #blind: BlindCounting;
  readonly #gate: ConnectionGate;
  /** The single node's guard, or one per Cluster master (by `host:port`). */
  readonly #guards = new Map<string, RemoteGuard>();
  readonly #runner: ScriptRunner;
  /** The server's time, for the fixed windows counted without the script (server clock). */
  readonly #serverTime: ServerClock;
  /**
   * Calls sent to Redis since start: script calls (NOSCRIPT fallbacks and the reset log's
   * included) and pipelines of fixed-window increments; not the give-backs of refused requests.
   */
  roundTrips = 0;
  /**
   * Fixed-window follow-ups that failed: a refused request's count left one too high until its
   * window ends, or a key left without an expiry (its window is in its name: never counted again).
   */
  followUpFailures = 0;
  /** The last connection error of a client the store owns (for health pages). */
  lastConnectionError: string | undefined;

  constructor(options: RedisStoreOptions) {
    if (typeof EDGELIMIT_BUNDLE === "undefined")
      checkOptions("redisStore", options, redisStoreShape(), { code: "EL_STORE_OPTION" });
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
    const client = this.client;
    this.#serverTime = new ServerClock(() => client.time());
    this.#runner = new ScriptRunner(this.client, () => {
      this.roundTrips++;
    });
    const { prefix, serverClock, breaker, timeoutMs, maxBatch } = scriptStoreSettings(
      options,
      "redisStore",
    );
    this.prefix = prefix;
    this.#serverClock = serverClock;
    this.#breakerOptions = breaker;
    this.#batch =
      this.#isCluster || maxBatch === 1
        ? undefined
        : new TickBatch(
            maxBatch,
            (keys, args) => this.#run(keys, args),
            (flush) => setImmediate(flush), // one script call a turn: see blind-counting.ts
          );
    this.#blind = new BlindCounting({
      client,
      maxBatch: this.#isCluster || maxBatch === 1 ? undefined : maxBatch,
      timeoutMs,
      serverNow: serverClock ? () => this.#serverNow() : undefined,
      keyOf: (counter) => this.redisKey(counter),
      sent: () => {
        this.roundTrips++;
      },
      followUpFailed: () => {
        this.followUpFailures++;
      },
    });
    this.#timeoutMs = timeoutMs;
    // A single node's stalled connection is made again; a Cluster's nodes are ioredis's own,
    // which bounds their slot discovery itself (`slotsRefreshTimeout`).
    this.#gate = new ConnectionGate({
      name: "redis",
      connectTimeoutMs: options.connectTimeoutMs,
      ready: this.client.status === "ready",
      onStalled: this.#isCluster ? undefined : () => this.client.disconnect(true),
    });
    if (!this.#isCluster) this.#guardFor(SINGLE_NODE);
    // After every (re)connection, cache the script before traffic asks for it: a restarted
    // server would otherwise answer NOSCRIPT to each of the first calls.
    this.client.on("ready", this.#onReady);
    this.client.on("connect", this.#onConnect);
    this.client.on("close", this.#onClose);
  }

  /** The single node's circuit breaker (a Cluster has one per master: see `status()`). */
  get breaker(): CircuitBreaker | undefined {
    return this.#guards.get(SINGLE_NODE)?.breaker;
  }

  status(): StoreStatus {
    return statusOf(this.#guards.values(), this.#gate.state);
  }

  readonly #onClientError = (error: Error): void => {
    this.lastConnectionError = error.message;
  };

  readonly #onReady = (): void => {
    this.#gate.connected();
    this.#loadScript().catch(() => {
      // The first call falls back to EVAL instead.
    });
  };

  readonly #onConnect = (): void => {
    this.#gate.attempting();
  };

  readonly #onClose = (): void => {
    this.#gate.lost(this.lastConnectionError ?? "connection closed");
  };

  #loadScript(): Promise<void> {
    return this.#runner.load();
  }

  /**
   * Resolves once the client is connected, the script is cached on every master and (server
   * clock) the server's time sampled, so that the first burst of requests does not each fall
   * back to EVAL or wait for a sample. The store fails fast until
   * the connection is up.
   */
  async ready(): Promise<void> {
    await this.#connected();
    await Promise.all([this.#loadScript(), this.#serverClock ? this.#serverTime.sample() : null]);
  }

  /** The server's time as this process estimates it; sampled first (bounded) when never yet. */
  #serverNow(): number | Promise<number> {
    return (
      this.#serverTime.now() ?? answeredInTime(this.#serverTime.at(), this.#timeoutMs, "redis")
    );
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

  apply(
    counters: readonly CounterSpec[],
    now: number,
    progress?: StoreCallProgress,
  ): Promise<CounterState[]> {
    if (counters.length === 0) return Promise.resolve([]);
    if (!this.#isCluster) {
      return this.#guardFor(SINGLE_NODE).run(
        (setup) => this.#whenConnected(setup, () => this.#applyGroup(counters, now)),
        progress,
      );
    }
    return applyBySubject(counters, (group) =>
      this.#guardFor(this.#nodeOf(group[0] as CounterSpec)).run(
        (setup) => this.#whenConnected(setup, () => this.#applyGroup(group, now)),
        progress,
      ),
    );
  }

  /** `send` now when connected, after the first connection when it is under way; else throws. */
  #whenConnected<T>(progress: StoreCallProgress | undefined, send: () => Promise<T>): Promise<T> {
    const waiting = this.#gate.ready(progress);
    return waiting === undefined ? send() : waiting.then(send);
  }

  /** The Cluster master that holds a counter's slot now (`host:port`). */
  #nodeOf(counter: CounterSpec): string {
    return this.#nodeOfKey(this.redisKey(counter));
  }

  #nodeOfKey(key: string): string {
    return (this.client as Cluster).slots[keySlot(key)]?.[0] ?? "unknown";
  }

  #guardFor(node: string): RemoteGuard {
    let guard = this.#guards.get(node);
    if (guard !== undefined) return guard;
    if (this.#guards.size >= MAX_NODE_GUARDS) {
      // Masters that left the Cluster: forget the healthy ones first.
      for (const [name, held] of this.#guards) if (held.healthy) this.#guards.delete(name);
      if (this.#guards.size >= MAX_NODE_GUARDS) this.#guards.clear();
    }
    guard = new RemoteGuard({
      name: node === SINGLE_NODE ? "redis" : `redis ${node}`,
      owner: "redisStore",
      breaker: this.#breakerOptions,
      probe: () => this.#ping(node),
      refusal: isRefusal,
    });
    this.#guards.set(node, guard);
    return guard;
  }

  /**
   * The probe before a call that tests an open circuit. A PING left unanswered on a single
   * node's connection that says it is ready is a half-open socket (a failover that left no reset
   * behind): the connection is made again, since nothing else would ever notice.
   */
  async #ping(node: string): Promise<void> {
    const client =
      node === SINGLE_NODE
        ? (this.client as Redis)
        : (this.client as Cluster)
            .nodes("master")
            .find((candidate) => `${candidate.options.host}:${candidate.options.port}` === node);
    if (client === undefined) {
      throw new EdgelimitError("EL_STORE_FAILED", `redis master ${node} is not in the Cluster`);
    }
    try {
      await answeredInTime(client.ping(), this.#timeoutMs, `redis ${node}`);
    } catch (error) {
      // A Cluster's node connections are ioredis's to manage: only a single node is made again.
      const stalled = error instanceof EdgelimitError && error.code === "EL_STORE_TIMEOUT";
      if (stalled && node === SINGLE_NODE && client.status === "ready") client.disconnect(true);
      throw error;
    }
  }

  /**
   * Deletes the counters' keys, a fixed window's around `now` too (the server's time with the
   * server clock; else `now`, or this process's clock when not given): one DEL per counter,
   * whose keys share a slot. Then logs them for the other processes' block caches
   * (`resetsSince`, reset-log.ts).
   */
  async reset(counters: readonly CounterSpec[], now?: number): Promise<void> {
    if (counters.length === 0) return;
    const at = this.#serverClock ? await this.#serverNow() : (now ?? Date.now());
    // A give-back sent after the DEL would take from the fresh count: this process's go first.
    this.#blind.flushFollowUps();
    await Promise.all(
      counters.map((counter) =>
        this.client.del(...resetKeysOf(this.redisKey(counter), counter, at)),
      ),
    );
    this.roundTrips++;
    await appendResetLog(this.client, this.prefix, counters);
  }

  /** A reader of the reset log for a limiter's block cache (`Store.followResets`). */
  followResets(cache: ForgetsBlocks, scheduler: Scheduler): ResetFollower {
    return new ResetWatch(cache, (mark, progress) => this.resetsSince(mark, progress), {
      storeName: this.name,
      shared: true,
      scheduler,
    });
  }

  /** The counters reset since `mark` by any process (the reset log, reset-log.ts). */
  resetsSince(mark: string | undefined, progress?: StoreCallProgress): Promise<ResetsSince> {
    const node = this.#isCluster ? this.#nodeOfKey(resetLogKeys(this.prefix)[0]) : SINGLE_NODE;
    const read = () =>
      readResetLog(this.client, this.prefix, mark, () => {
        this.roundTrips++;
      });
    return this.#guardFor(node).run(
      (setup) => this.#whenConnected(setup, () => answeredInTime(read(), this.#timeoutMs, "redis")),
      progress,
    );
  }

  /** Overrides beside the counters, for every process on this Redis (overrides.ts). */
  readonly overrides = (): RedisOverrides =>
    new RedisOverrides(ioredisCommands(this.client), this.prefix);

  async close(): Promise<void> {
    this.client.off("ready", this.#onReady);
    this.client.off("connect", this.#onConnect);
    this.client.off("close", this.#onClose);
    this.#gate.close();
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
    return redisKeyOf(this.prefix, counter);
  }

  #applyGroup(counters: readonly CounterSpec[], now: number): Promise<CounterState[]> {
    if (this.#runner.functions && onlyFixedWindows(counters))
      return this.#blind.count(counters, now);
    const nowArgument = this.#serverClock ? "" : String(now);
    const request = encodeRequest(counters, nowArgument, (counter) => this.redisKey(counter));
    if (this.#batch !== undefined) return this.#batch.submit(request);
    return this.#run(request.keys, request.args).then((reply) =>
      decodeReply(reply, 0, counters.length),
    );
  }

  /** The script call (runner.ts), bounded by `timeoutMs`. */
  #run(keys: string[], args: string[]): Promise<unknown> {
    return answeredInTime(this.#runner.run(keys, args), this.#timeoutMs, "redis");
  }
}

/** An error reply that refuses the call's data: ioredis names its error replies `ReplyError`. */
function isRefusal(error: unknown): boolean {
  return refusesCall(error, (reply) => reply.name === "ReplyError");
}

/** The guard's key for a single node's store. */
const SINGLE_NODE = "";

/** A Redis store from options (client or URL). */
export function redisStore(options: RedisStoreOptions): RedisStore {
  return new RedisStore(options);
}

/** A Redis store that owns its client, for `edgelimit serve --store redis://…`. */
export function redisStoreFromUrl(url: string): RedisStore {
  if (typeof EDGELIMIT_BUNDLE === "undefined")
    checkArgument("redisStoreFromUrl", "the URL", url, "string", "EL_STORE_URL");
  return new RedisStore({ client: url });
}
