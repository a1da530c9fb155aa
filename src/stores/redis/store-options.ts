/** The Redis store's options (store.ts), and their run-time check's view (core/options.ts). */
import { isObject, type OptionsShape, required } from "../../core/options.js";
import type { RedisClient } from "./client.js";
import { type ScriptStoreOptions, scriptStoreShape } from "./options.js";

export interface RedisStoreOptions extends ScriptStoreOptions {
  /**
   * An ioredis `Redis` or `Cluster` client, or a URL (`redis://host:port[/db]`,
   * `rediss://…`, `redis+cluster://host:port,host:port`). A client you pass stays yours: the
   * store never closes it. Configure it as `redisClientOptions()` does (no offline queue,
   * bounded retries, a command timeout), or a dead server can make calls wait. Batching
   * (`maxBatch`) is for a single node only; on a Cluster each master has its own breaker, so a
   * stopped master fails its own slots at once and no other's.
   */
  readonly client: RedisClient | string;
  /**
   * How long a connection may take to become ready (default 1000 ms). A fresh store's first
   * calls wait for its first connection at most this long after the store was made; a later
   * connection not ready this long after its TCP connection opened (a server that accepts and
   * stays silent) is dropped and made again. See docs/redis.md, "Failure behaviour".
   */
  readonly connectTimeoutMs?: number;
}

export function redisStoreShape() {
  return {
    ...scriptStoreShape(),
    client: required(["string", { describe: "an ioredis client", test: isObject }]),
    connectTimeoutMs: "number",
  } satisfies OptionsShape<RedisStoreOptions>;
}
