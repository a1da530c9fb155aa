import { EdgelimitError } from "../core/errors.js";
import type { Store } from "../core/types.js";
import { memoryStore } from "./memory.js";

/**
 * Opens the store a `--store` argument names:
 * `memory`, `redis://HOST:PORT` (or `rediss://`), `redis+cluster://h:p,h:p`,
 * `dynamodb://TABLE?region=R&endpoint=URL`.
 * The Redis and DynamoDB stores are imported only when asked for, so the gateway starts without
 * loading their clients.
 */
export async function storeFromUrl(url: string): Promise<Store> {
  const text = url.trim();
  if (text === "" || text === "memory" || text === "memory://") return memoryStore();
  const scheme = text.slice(0, text.indexOf("://") + 3).toLowerCase();
  if (scheme === "redis://" || scheme === "rediss://" || scheme === "redis+cluster://") {
    const module = await optionalStoreModule("./redis.js", "Redis");
    const open = module.redisStoreFromUrl;
    if (typeof open !== "function") throw missingExport("redis", "redisStoreFromUrl");
    return (await open(text)) as Store;
  }
  if (scheme === "dynamodb://") {
    const module = await optionalStoreModule("./dynamodb.js", "DynamoDB");
    const open = module.dynamodbStoreFromUrl;
    if (typeof open !== "function") throw missingExport("dynamodb", "dynamodbStoreFromUrl");
    return (await open(text)) as Store;
  }
  throw new EdgelimitError(
    "EL_BAD_ARGUMENT",
    `--store: unknown store "${redact(text)}"; use memory, redis://HOST:PORT, redis+cluster://HOST:PORT,HOST:PORT or dynamodb://TABLE?region=REGION`,
  );
}

/** The store URL with any password hidden, for logs and the dashboard. */
export function redact(url: string): string {
  return url.replace(/^([a-z+]+:\/\/)([^@/]*)@/i, (_match, scheme: string) => `${scheme}***@`);
}

type StoreModule = Record<string, ((url: string) => Store | Promise<Store>) | undefined>;

async function optionalStoreModule(specifier: string, label: string): Promise<StoreModule> {
  try {
    return (await import(specifier)) as StoreModule;
  } catch (error) {
    if (isModuleMissing(error, specifier)) {
      throw new EdgelimitError(
        "EL_BAD_ARGUMENT",
        `--store: the ${label} store is not part of this build (src/stores/${specifier.slice(2, -3)}.ts is missing); use --store memory`,
      );
    }
    throw error;
  }
}

/** True when `specifier` itself is missing, not when it exists but one of its imports fails. */
export function isModuleMissing(error: unknown, specifier: string): boolean {
  const code = (error as { code?: string } | undefined)?.code;
  if (code !== "ERR_MODULE_NOT_FOUND") return false;
  const message = (error as Error).message;
  const stem = specifier.replace(/^\.\.?\//, "").replace(/\.js$/, "");
  return message.includes(`${stem}.js`) || message.includes(`${stem}.ts`) || message.includes(stem);
}

function missingExport(file: string, name: string): EdgelimitError {
  return new EdgelimitError(
    "EL_BAD_ARGUMENT",
    `--store: src/stores/${file}.ts does not export ${name}(url)`,
  );
}
