/**
 * The Redis store's fixed windows counted without the script (fixed-windows.ts): one `INCRBY`
 * per counter, a turn's requests in one pipeline on a single node (fixed-window-batch.ts), each
 * call bounded by the store's call timeout. The expiries of keys a call made and a refused
 * request's give-back follow without waiting, on the same connection.
 */
import type { Pipeline } from "ioredis";
import type { CounterSpec, CounterState } from "../../core/types.js";
import { answeredInTime } from "../remote/call-timeout.js";
import type { RedisClient } from "./client.js";
import { FixedWindowBatch } from "./fixed-window-batch.js";
import { countFixedWindows, FixedWindowRequest, sendFollowUp } from "./fixed-windows.js";

export interface BlindCountingOptions {
  readonly client: RedisClient;
  /** Requests in one pipeline at most; undefined sends each on its own (a Cluster, `maxBatch` 1). */
  readonly maxBatch: number | undefined;
  readonly timeoutMs: number;
  /** The server's time as the store estimates it (server clock); undefined counts at the caller's. */
  readonly serverNow: (() => number | Promise<number>) | undefined;
  /** A counter's Redis key (`redisKeyOf`). */
  readonly keyOf: (counter: CounterSpec) => string;
  /** Counts each call sent (`RedisStore.roundTrips`). */
  readonly sent: () => void;
  /** Counts a follow-up that failed (`RedisStore.followUpFailures`). */
  readonly followUpFailed: () => void;
}

export class BlindCounting {
  readonly #options: BlindCountingOptions;
  /** Fixed-window requests of one turn in one pipeline; undefined when batching is off. */
  readonly #batch: FixedWindowBatch | undefined;

  constructor(options: BlindCountingOptions) {
    this.#options = options;
    const { client, maxBatch, timeoutMs } = options;
    this.#batch =
      maxBatch === undefined
        ? undefined
        : new FixedWindowBatch({
            maxBatch,
            pipeline: () => client.pipeline() as Pipeline,
            exec: (pipeline) => answeredInTime(pipeline.exec(), timeoutMs, "redis"),
            // After this turn's I/O callbacks, not after the current tick: a service answering
            // many clients reads one call per socket read, so a tick holds one request and
            // each would be a pipeline (a write to Redis) of its own. bench/rls.bench.ts, part 1
            // (rls on Redis, 64 calls in flight), is the load that shows it.
            defer: (flush) => setImmediate(flush),
            later: (flush) => setImmediate(flush),
            sent: options.sent,
            followUpFailed: options.followUpFailed,
          });
  }

  /**
   * A request of fixed windows only, at the server's time (server clock: each state then says so
   * as `storeNow`) or at `callerNow`.
   */
  async count(counters: readonly CounterSpec[], callerNow: number): Promise<CounterState[]> {
    const options = this.#options;
    const serverNow = options.serverNow;
    const now = serverNow === undefined ? callerNow : await serverNow();
    const request = new FixedWindowRequest(counters, now, options.keyOf, serverNow !== undefined);
    const batch = this.#batch;
    if (batch === undefined) options.sent();
    const { states, followUp } = await (batch === undefined
      ? answeredInTime(countFixedWindows(options.client, request), options.timeoutMs, "redis")
      : batch.submit(request));
    if (followUp.length === 0) return states;
    if (batch !== undefined) batch.followUp(followUp);
    else sendFollowUp(options.client, followUp).catch(options.followUpFailed);
    return states;
  }

  /** Sends this process's pending follow-ups now (before a reset's DEL: see `RedisStore.reset`). */
  flushFollowUps(): void {
    this.#batch?.flushFollowUps();
  }
}
