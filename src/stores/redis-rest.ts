/**
 * `edgelimit/redis-rest`: counters in Redis over HTTP (the Upstash REST protocol: Upstash,
 * Vercel KV, self-hosted proxies), for runtimes that have `fetch` and no sockets. The same
 * script and keys as `edgelimit/redis`; no Node built-ins, so it bundles for Next.js
 * middleware, workerd and `esbuild --platform=browser`. The implementation is in `redis-rest/`.
 */
import { RedisRestStore } from "./redis-rest/store.js";
import { checkUrlArguments, redisRestOptionsFromUrl } from "./redis-rest/url.js";

export {
  type PipelineReply,
  RedisReplyError,
  RedisRestClient,
  type RedisRestClientOptions,
} from "./redis-rest/client.js";
export { RedisRestStore, type RedisRestStoreOptions, redisRestStore } from "./redis-rest/store.js";
export { REDIS_REST_TOKEN_VARIABLE, redisRestOptionsFromUrl } from "./redis-rest/url.js";
export { CircuitBreaker, type CircuitBreakerOptions } from "./remote/breaker.js";

/**
 * A store from a `redis+https://[:TOKEN@]HOST[/PATH]` URL (`edgelimit serve --store`); without a
 * token in the URL, `env.EDGELIMIT_REDIS_REST_TOKEN`.
 */
export function redisRestStoreFromUrl(
  url: string,
  env: Readonly<Record<string, string | undefined>> = {},
): RedisRestStore {
  checkUrlArguments("redisRestStoreFromUrl", url, env);
  return new RedisRestStore(redisRestOptionsFromUrl(url, env));
}
