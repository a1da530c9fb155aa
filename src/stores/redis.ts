/**
 * `edgelimit/redis`: counters in Redis or Redis Cluster (ioredis): one Lua call (a Redis 7
 * function, or a script) applies all of a request's counters (and, on a single node, all
 * requests of the same turn of the event loop). The implementation is in `redis/`; this file
 * is the package entry point.
 */

export {
  createRedisClient,
  type RedisClient,
  type RedisConnectionTuning,
  redisClientOptions,
} from "./redis/client.js";
export {
  APPLY_COUNTERS_FUNCTION,
  APPLY_COUNTERS_LIBRARY,
  APPLY_COUNTERS_LUA,
  APPLY_COUNTERS_SHA,
} from "./redis/script.js";
export {
  RedisStore,
  type RedisStoreOptions,
  redisStore,
  redisStoreFromUrl,
} from "./redis/store.js";
export { CircuitBreaker, type CircuitBreakerOptions } from "./remote/breaker.js";
