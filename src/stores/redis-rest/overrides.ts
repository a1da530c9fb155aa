/**
 * Overrides in Redis over HTTP: the same two keys and the same change script as the Redis store
 * (stores/redis/overrides.ts), carried by the REST client one command per request. A limiter's
 * background read is one `HMGET` request every refresh, and one `HGETALL` when it moved.
 */
import { EdgelimitError } from "../../core/errors.js";
import type { OverrideCommands } from "../redis/overrides.js";
import type { RedisRestClient } from "./client.js";

export function restCommands(client: RedisRestClient): OverrideCommands {
  return {
    hmget: async (key, fields) => strings(await client.command(["HMGET", key, ...fields]), true),
    hgetall: async (key) => {
      const reply = await client.command(["HGETALL", key]);
      // Upstash answers a flat array of fields and values.
      const flat = strings(reply, false) as string[];
      const all: Record<string, string> = {};
      for (let i = 0; i + 1 < flat.length; i += 2) all[flat[i] as string] = flat[i + 1] as string;
      return all;
    },
    lrange: async (key, start, stop) =>
      strings(await client.command(["LRANGE", key, start, stop]), false) as string[],
    eval: (script, keys, args) => client.command(["EVAL", script, keys.length, ...keys, ...args]),
  };
}

function strings(reply: unknown, nullable: boolean): (string | null)[] {
  if (
    Array.isArray(reply) &&
    reply.every((item) => typeof item === "string" || (nullable && item === null))
  ) {
    return reply as (string | null)[];
  }
  throw new EdgelimitError("EL_STORE_FAILED", "Redis over HTTP answered overrides unexpectedly");
}
