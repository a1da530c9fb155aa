/** The reset log (reset-log.ts) over an ioredis client: what the Redis store sends to it. */
import type { CounterSpec, ResetsSince } from "../../core/types.js";
import type { RedisClient } from "./client.js";
import {
  APPEND_RESETS_LUA,
  appendArguments,
  READ_RESETS_LUA,
  readResets,
  resetLogKeys,
} from "./reset-log.js";

/** Appends reset counters to the log: one script call, in the log's slot. */
export function appendResetLog(
  client: RedisClient,
  prefix: string,
  counters: readonly CounterSpec[],
): Promise<unknown> {
  const [state, log] = resetLogKeys(prefix);
  return client.eval(APPEND_RESETS_LUA, 2, state, log, ...appendArguments(counters));
}

/**
 * The counters reset since `mark`: an HMGET while nothing changed, a script call (`scripted`
 * counts it) when something did.
 */
export function readResetLog(
  client: RedisClient,
  prefix: string,
  mark: string | undefined,
  scripted: () => void,
): Promise<ResetsSince> {
  const [state, log] = resetLogKeys(prefix);
  return readResets(
    mark,
    () => client.hmget(state, "epoch", "sequence"),
    (since) => {
      scripted();
      return client.eval(READ_RESETS_LUA, 2, state, log, since);
    },
  );
}
