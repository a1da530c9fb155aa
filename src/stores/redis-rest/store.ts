import type { Scheduler } from "../../core/deadline.js";
import { EdgelimitError } from "../../core/errors.js";
import { checkOptions, type OptionsShape } from "../../core/options.js";
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
import { TickBatch } from "../redis/batch.js";
import { decodeReply, encodeRequest, redisKeyOf } from "../redis/encoding.js";
import { resetKeysOf } from "../redis/fixed-windows.js";
import {
  type ScriptStoreOptions,
  scriptStoreSettings,
  scriptStoreShape,
} from "../redis/options.js";
import { RedisOverrides } from "../redis/overrides.js";
import { lostScript, refusesCall } from "../redis/refusal.js";
import {
  APPEND_RESETS_LUA,
  appendArguments,
  READ_RESETS_LUA,
  readResets,
  resetLogKeys,
} from "../redis/reset-log.js";
import { APPLY_COUNTERS_LUA, APPLY_COUNTERS_SHA } from "../redis/script.js";
import type { CircuitBreaker } from "../remote/breaker.js";
import { answeredInTime } from "../remote/call-timeout.js";
import { RemoteGuard } from "../remote/guard.js";
import { statusOf } from "../remote/health.js";
import { isWorkerd } from "../remote/runtime.js";
import {
  type RedisArgument,
  RedisReplyError,
  RedisRestClient,
  restConnectionShape,
} from "./client.js";
import { restCommands } from "./overrides.js";

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

function redisRestStoreShape() {
  return {
    ...scriptStoreShape(),
    ...restConnectionShape(),
  } satisfies OptionsShape<RedisRestStoreOptions>;
}

/**
 * Counters in Redis reached over HTTP (the Upstash REST protocol): the script, the keys and the
 * arithmetic of `edgelimit/redis` (`../redis/script.ts`, `../redis/encoding.ts`), so both stores
 * can count the same subjects in one database, with `fetch` as the only I/O. For Next.js
 * middleware, Vercel Functions, Deno Deploy, Bun, Workers without bindings, and Node.
 *
 * One request's counters are one `EVALSHA` (one HTTP request); decisions of the same turn are
 * batched into one. The first call of an instance sets up the connection (TLS to the
 * provider), which the decision budget does not take for a slow store. Calls go through the
 * remote-store guard (`../remote/guard.ts`) as every remote store's do: a circuit breaker, a
 * PING before the call that probes an open circuit, and `traits.status` for health pages.
 */
export class RedisRestStore implements Store {
  readonly name = "redis-rest";
  /** `requestScopedIo` on Workers: a call one request started is never shared with another. */
  readonly traits: StoreTraits;
  readonly prefix: string;
  readonly client: RedisRestClient;
  readonly #guard: RemoteGuard;
  readonly #serverClock: boolean;
  readonly #timeoutMs: number;
  /** Undefined when batching is off. */
  readonly #batch: TickBatch | undefined;
  /** True once a call has settled: the connection is set up (or known not to be). */
  #warm = false;
  /** HTTP requests sent since start (NOSCRIPT fallbacks included). */
  roundTrips = 0;
  /**
   * Overrides beside the counters (redis-rest/overrides.ts), as the Redis store keeps them. On
   * Workers (`requestScopedIo`) a limiter's requests refresh its copy, not a timer (limiter.ts).
   */
  readonly overrides: (() => RedisOverrides) | undefined;

  constructor(options: RedisRestStoreOptions) {
    if (typeof EDGELIMIT_BUNDLE === "undefined")
      checkOptions("redisRestStore", options, redisRestStoreShape(), { code: "EL_STORE_OPTION" });
    this.client = new RedisRestClient({ url: options.url, token: options.token });
    const requestScopedIo = isWorkerd();
    this.traits = { requestScopedIo, status: () => this.status() };
    const { prefix, serverClock, breaker, timeoutMs, maxBatch } = scriptStoreSettings(
      options,
      "redisRestStore",
      requestScopedIo ? 1 : undefined,
    );
    this.prefix = prefix;
    this.overrides = () => new RedisOverrides(restCommands(this.client), this.prefix, "redis-rest");
    this.#serverClock = serverClock;
    this.#timeoutMs = timeoutMs;
    // Each call bounds itself (`#call`, which aborts the request), the probe's PING too.
    this.#guard = new RemoteGuard({
      name: "redis REST",
      owner: "redisRestStore",
      breaker,
      probe: () => this.#call(["PING"]),
      refusal: (error) => refusesCall(error, (reply) => reply instanceof RedisReplyError),
    });
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
    const request = encodeRequest(counters, this.#serverClock ? "" : String(now), (counter) =>
      redisKeyOf(this.prefix, counter),
    );
    return this.#guarded(progress, async () =>
      this.#batch === undefined
        ? decodeReply(await this.#run(request.keys, request.args), 0, counters.length)
        : await this.#batch.submit(request),
    );
  }

  /** The circuit breaker (`state`, `opened`, `rejected`); undefined with `breaker: false`. */
  get breaker(): CircuitBreaker | undefined {
    return this.#guard.breaker;
  }

  /** What `/healthz` and the dashboard show of the store's calls. */
  status(): StoreStatus {
    return statusOf([this.#guard]);
  }

  /**
   * A call through the guard, its failures as `EL_STORE_FAILED`. fetch cannot say when its
   * connection is up: a fresh instance's first call, handshake included, is all connection
   * setup for the budget.
   */
  #guarded<T>(progress: StoreCallProgress | undefined, call: () => Promise<T>): Promise<T> {
    return this.#guard.run(async (setup) => {
      const connected = this.#warm ? undefined : setup?.connecting();
      try {
        return await call();
      } finally {
        this.#warm = true;
        connected?.();
      }
    }, progress);
  }

  /**
   * Deletes the counters' keys, a fixed window's around `now` too (the server's `TIME` with the
   * server clock, one more request; else `now`, or this process's clock): one DEL each. Then
   * logs them for the other processes' block caches (`resetsSince`, ../redis/reset-log.ts): one
   * request, run in that order.
   */
  async reset(counters: readonly CounterSpec[], now?: number): Promise<void> {
    if (counters.length === 0) return;
    const at = this.#serverClock ? await this.#serverTime() : (now ?? Date.now());
    this.roundTrips++;
    const [state, log] = resetLogKeys(this.prefix);
    const replies = await this.client.pipeline([
      ...counters.map((counter) => [
        "DEL",
        ...resetKeysOf(redisKeyOf(this.prefix, counter), counter, at),
      ]),
      ["EVAL", APPEND_RESETS_LUA, 2, state, log, ...appendArguments(counters)],
    ]);
    const failed = replies.find((reply) => "error" in reply);
    if (failed !== undefined && "error" in failed) {
      throw new EdgelimitError("EL_STORE_FAILED", `redis REST reset failed: ${failed.error}`);
    }
  }

  /** A reader of the reset log for a limiter's block cache (`Store.followResets`). */
  followResets(cache: ForgetsBlocks, scheduler: Scheduler): ResetFollower {
    return new ResetWatch(cache, (mark, progress) => this.resetsSince(mark, progress), {
      storeName: this.name,
      shared: this.traits.requestScopedIo !== true,
      scheduler,
    });
  }

  /** The counters reset since `mark` by any process (the reset log, ../redis/reset-log.ts). */
  async resetsSince(mark: string | undefined, progress?: StoreCallProgress): Promise<ResetsSince> {
    const [state, log] = resetLogKeys(this.prefix);
    return this.#guarded(progress, () =>
      readResets(
        mark,
        async () => {
          const fields = await this.#call(["HMGET", state, "epoch", "sequence"]);
          return Array.isArray(fields) ? fields : [];
        },
        (since) => this.#call(["EVAL", READ_RESETS_LUA, 2, state, log, since]),
      ),
    );
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
      if (!(error instanceof RedisReplyError) || !lostScript(error)) throw error;
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

/** A store from options (endpoint and token). */
export function redisRestStore(options: RedisRestStoreOptions): RedisRestStore {
  return new RedisRestStore(options);
}
