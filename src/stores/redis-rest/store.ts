import { EdgelimitError } from "../../core/errors.js";
import type {
  CounterSpec,
  CounterState,
  Store,
  StoreCallProgress,
  StoreTraits,
} from "../../core/types.js";
import { TickBatch } from "../redis/batch.js";
import { decodeReply, encodeRequest, redisKeyOf } from "../redis/encoding.js";
import { resetKeysOf } from "../redis/fixed-windows.js";
import { type ScriptStoreOptions, scriptStoreSettings } from "../redis/options.js";
import { APPLY_COUNTERS_LUA, APPLY_COUNTERS_SHA } from "../redis/script.js";
import { CircuitBreaker } from "../remote/breaker.js";
import { answeredInTime } from "../remote/call-timeout.js";
import { type RedisArgument, RedisReplyError, RedisRestClient } from "./client.js";

/**
 * The endpoint and its token, and the options of `edgelimit/redis` (`ScriptStoreOptions`). A
 * call that times out (`timeoutMs`) is aborted. Batching (`maxBatch`) joins the decisions of one
 * turn of the event loop; on Cloudflare Workers, where one request cannot await another's I/O,
 * it defaults to 1.
 */
export interface RedisRestStoreOptions extends ScriptStoreOptions {
  /** The REST endpoint (Upstash: `UPSTASH_REDIS_REST_URL`; Vercel KV: `KV_REST_API_URL`). */
  readonly url: string;
  /** Its token (Upstash: `UPSTASH_REDIS_REST_TOKEN`; Vercel KV: `KV_REST_API_TOKEN`). */
  readonly token: string;
}

/**
 * Counters in Redis reached over HTTP (the Upstash REST protocol): the script, the keys and the
 * arithmetic of `edgelimit/redis` (`../redis/script.ts`, `../redis/encoding.ts`), so both stores
 * can count the same subjects in one database, with `fetch` as the only I/O. For Next.js
 * middleware, Vercel Functions, Deno Deploy, Bun, Workers without bindings, and Node.
 *
 * One request's counters are one `EVALSHA` (one HTTP request); decisions of the same turn are
 * batched into one. The first call of an instance sets up the connection (TLS to the
 * provider), which the decision budget does not take for a slow store.
 */
export class RedisRestStore implements Store {
  readonly name = "redis-rest";
  /** True on Workers: a call one request started is never shared with another. */
  readonly traits: StoreTraits;
  readonly prefix: string;
  readonly breaker: CircuitBreaker | undefined;
  readonly client: RedisRestClient;
  readonly #serverClock: boolean;
  readonly #timeoutMs: number;
  /** Undefined when batching is off. */
  readonly #batch: TickBatch | undefined;
  /** True once a call has settled: the connection is set up (or known not to be). */
  #warm = false;
  /** HTTP requests sent since start (NOSCRIPT fallbacks included). */
  roundTrips = 0;

  constructor(options: RedisRestStoreOptions) {
    this.client = new RedisRestClient(options);
    const requestScopedIo = isWorkerd();
    this.traits = { requestScopedIo };
    const { prefix, serverClock, breaker, timeoutMs, maxBatch } = scriptStoreSettings(
      options,
      "redisRestStore",
      requestScopedIo ? 1 : undefined,
    );
    this.prefix = prefix;
    this.#serverClock = serverClock;
    this.breaker = breaker === false ? undefined : new CircuitBreaker(breaker);
    this.#timeoutMs = timeoutMs;
    this.#batch =
      maxBatch === 1
        ? undefined
        : new TickBatch(
            maxBatch,
            (keys, args) => this.#run(keys, args),
            (flush) => queueMicrotask(flush),
          );
  }

  /**
   * Loads the script into Redis's cache (`SCRIPT LOAD`), so that the first requests do not each
   * fall back to `EVAL`; rejects when the endpoint cannot be reached or refuses the token.
   */
  async ready(): Promise<void> {
    await this.#call(["SCRIPT", "LOAD", APPLY_COUNTERS_LUA]);
    this.#warm = true;
  }

  async apply(
    counters: readonly CounterSpec[],
    now: number,
    progress?: StoreCallProgress,
  ): Promise<CounterState[]> {
    if (counters.length === 0) return [];
    const breaker = this.breaker;
    if (breaker !== undefined && !breaker.tryAcquire()) {
      throw new EdgelimitError(
        "EL_STORE_FAILED",
        "redis REST circuit breaker is open after repeated failures; retrying shortly",
      );
    }
    const request = encodeRequest(counters, this.#serverClock ? "" : String(now), (counter) =>
      redisKeyOf(this.prefix, counter),
    );
    // fetch cannot say when its connection is up: a fresh instance's first call, handshake
    // included, is all connection setup for the budget.
    const connected = this.#warm ? undefined : progress?.connecting();
    try {
      const states =
        this.#batch === undefined
          ? decodeReply(await this.#run(request.keys, request.args), 0, counters.length)
          : await this.#batch.submit(request);
      breaker?.recordSuccess();
      return states;
    } catch (error) {
      breaker?.recordFailure();
      if (error instanceof EdgelimitError) throw error;
      throw new EdgelimitError(
        "EL_STORE_FAILED",
        `redis REST store failed: ${error instanceof Error ? error.message : String(error)}`,
      );
    } finally {
      this.#warm = true;
      connected?.();
    }
  }

  /**
   * Deletes the counters' keys, a fixed window's around `now` too (the server's `TIME` with the
   * server clock, one more request; else `now`, or this process's clock): one DEL each.
   */
  async reset(counters: readonly CounterSpec[], now?: number): Promise<void> {
    if (counters.length === 0) return;
    const at = this.#serverClock ? await this.#serverTime() : (now ?? Date.now());
    this.roundTrips++;
    const replies = await this.client.pipeline(
      counters.map((counter) => [
        "DEL",
        ...resetKeysOf(redisKeyOf(this.prefix, counter), counter, at),
      ]),
    );
    const failed = replies.find((reply) => "error" in reply);
    if (failed !== undefined && "error" in failed) {
      throw new EdgelimitError("EL_STORE_FAILED", `redis REST reset failed: ${failed.error}`);
    }
  }

  async #serverTime(): Promise<number> {
    this.roundTrips++;
    const [seconds, micros] = (await this.client.command(["TIME"])) as [string, string];
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  }

  async close(): Promise<void> {
    // Nothing is held open: each call is a fetch.
  }

  /** EVALSHA; EVAL once when Redis has lost the script (a restart, SCRIPT FLUSH, a new database). */
  async #run(keys: string[], args: string[]): Promise<unknown> {
    const rest = [String(keys.length), ...keys, ...args];
    try {
      return await this.#call(["EVALSHA", APPLY_COUNTERS_SHA, ...rest]);
    } catch (error) {
      if (!(error instanceof RedisReplyError) || !error.message.startsWith("NOSCRIPT")) throw error;
      return this.#call(["EVAL", APPLY_COUNTERS_LUA, ...rest]);
    }
  }

  /** One command, bounded by `timeoutMs`; a call that times out is aborted. */
  async #call(command: readonly RedisArgument[]): Promise<unknown> {
    this.roundTrips++;
    const abort = new AbortController();
    try {
      return await answeredInTime(
        this.client.command(command, abort.signal),
        this.#timeoutMs,
        "redis REST",
      );
    } catch (error) {
      abort.abort();
      throw error;
    }
  }
}

/**
 * Cloudflare's runtime names itself here; there a request's I/O belongs to that request, so
 * calls are never batched across requests.
 */
function isWorkerd(): boolean {
  const navigator = (globalThis as { navigator?: { userAgent?: string } }).navigator;
  return navigator?.userAgent === "Cloudflare-Workers";
}

/** A store from options (endpoint and token). */
export function redisRestStore(options: RedisRestStoreOptions): RedisRestStore {
  return new RedisRestStore(options);
}
