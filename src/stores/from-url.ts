import { EdgelimitError } from "../core/errors.js";
import { hybridCounting } from "../core/hybrid-counting.js";
import type { Store } from "../core/types.js";
import { memoryStore } from "./memory.js";
import { redact } from "./redact.js";

/**
 * Opens the store a `--store` argument names:
 * `memory`, `redis://HOST:PORT` (or `rediss://`), `redis+cluster://h:p,h:p`,
 * `redis+https://[:TOKEN@]HOST[/PATH]` (Redis over HTTP, the Upstash REST protocol; the token
 * from `EDGELIMIT_REDIS_REST_TOKEN` when the URL has none), `dynamodb://TABLE?region=R&endpoint=URL`.
 * The Redis and DynamoDB stores are imported only when asked for, so the gateway starts without
 * loading their clients. `rediss://` and `rediss+cluster://` use TLS. A remote store comes with
 * hybrid counting in front (`hybridCounting`), so that a policy with `counting: hybrid` rules,
 * now or after a reload, reserves; it passes every other request straight through.
 */
export async function storeFromUrl(
  url: string,
  options: {
    readonly onUnreachable?: (cause: string) => void;
    /** Where a `redis+https://` URL without a token finds it (default `process.env`). */
    readonly env?: Readonly<Record<string, string | undefined>>;
  } = {},
): Promise<Store> {
  const text = url.trim();
  if (text === "" || text === "memory" || text === "memory://") return memoryStore();
  const scheme = text.slice(0, text.indexOf("://") + 3).toLowerCase();
  if (REDIS_SCHEMES.has(scheme)) {
    const { redisStoreFromUrl } = await import("./redis.js").catch((error: unknown) => {
      if ((error as { code?: string }).code !== "ERR_MODULE_NOT_FOUND") throw error;
      throw new EdgelimitError(
        "EL_MISSING_PACKAGE",
        `--store ${redact(text)} needs the package ioredis, which is not installed: npm install ioredis`,
      );
    });
    const store = redisStoreFromUrl(text);
    // Connect and load the script before serving; a Redis that is down is the fail modes' job,
    // and the caller hears of it (`onUnreachable`) so that it can say so.
    const reachable = await readiness(store.ready(), "no connection");
    if (reachable !== undefined) {
      const cause = store.lastConnectionError ?? reachable;
      options.onUnreachable?.(`${redact(text)}: ${cause}`);
    }
    return hybridCounting(store);
  }
  if (scheme === "redis+https://" || scheme === "redis+http://") {
    const { redisRestStoreFromUrl } = await import("./redis-rest.js");
    const store = redisRestStoreFromUrl(text, options.env ?? process.env);
    // Load the script before serving, as for redis:// above.
    const reachable = await readiness(store.ready(), "no answer");
    if (reachable !== undefined) options.onUnreachable?.(`${redact(text)}: ${reachable}`);
    return hybridCounting(store);
  }
  if (scheme === "dynamodb://") {
    const { dynamodbStoreFromUrl } = await import("./dynamodb.js");
    return hybridCounting(dynamodbStoreFromUrl(text));
  }
  throw new EdgelimitError(
    "EL_STORE_URL",
    `--store: unknown store "${redact(text)}"; use memory, redis://HOST:PORT, rediss://HOST:PORT, redis+cluster://HOST:PORT,HOST:PORT, redis+https://:TOKEN@HOST or dynamodb://TABLE?region=REGION`,
  );
}

const REDIS_SCHEMES = new Set(["redis://", "rediss://", "redis+cluster://", "rediss+cluster://"]);
const READY_WAIT_MS = 2000;

/** Undefined once `ready` has resolved; otherwise why not, after at most READY_WAIT_MS. */
function readiness(ready: Promise<void>, silence: string): Promise<string | undefined> {
  return Promise.race([
    ready.then(
      () => undefined,
      (error: unknown) => (error instanceof Error ? error.message : String(error)),
    ),
    delay(READY_WAIT_MS).then(() => `${silence} within ${READY_WAIT_MS} ms`),
  ]);
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
