/**
 * Overrides in Redis (and Redis Cluster), for the Redis store's `overrides()`: two keys beside
 * the counters, in one Cluster slot (`{overrides}`): a hash with one field per subject and scope
 * (`<subject> <scope>`: a subject holds no space) holding the override as JSON, plus `version`
 * and `epoch` fields; and a list, the change log, capped at OVERRIDE_LOG_SIZE entries. A change
 * is one script call (check the bound, write, bump the version, log); a limiter's background
 * read is one `HMGET version epoch`, and one `HGETALL` when that moved. Neither key expires;
 * the epoch tells a flushed Redis from one where nothing changed.
 */
import { EdgelimitError } from "../../core/errors.js";
import {
  OVERRIDE_LOG_SIZE,
  type Override,
  type OverrideChange,
  type OverrideSource,
} from "../../core/overrides.js";
import { fieldOf, full, setChange } from "../memory-overrides.js";
import type { RedisClient } from "./client.js";

/**
 * The four commands overrides need, whatever carries them: ioredis (Redis, Cluster) or Redis
 * over HTTP (stores/redis-rest/overrides.ts).
 */
export interface OverrideCommands {
  hmget(key: string, fields: readonly string[]): Promise<readonly (string | null)[]>;
  hgetall(key: string): Promise<Readonly<Record<string, string>>>;
  lrange(key: string, start: number, stop: number): Promise<readonly string[]>;
  eval(script: string, keys: readonly string[], args: readonly string[]): Promise<unknown>;
}

/** The commands on an ioredis client. */
export function ioredisCommands(client: RedisClient): OverrideCommands {
  return {
    hmget: (key, fields) => client.hmget(key, ...fields),
    hgetall: (key) => client.hgetall(key),
    lrange: (key, start, stop) => client.lrange(key, start, stop),
    eval: (script, keys, args) => client.eval(script, keys.length, ...keys, ...args),
  };
}

/** The two keys under a store's prefix: they cannot be a counter's (`{subject}|…`). */
export function overrideKeys(prefix: string): [string, string] {
  return [`${prefix}{overrides}`, `${prefix}{overrides}log`];
}

/**
 * KEYS: hash, log. ARGV: field (empty to remove), JSON (or the field to remove), now, max,
 * log entry, log size, a new epoch. Returns 1 when changed, 0 when removing nothing, -1 when full.
 */
const CHANGE_LUA = `
local removing = ARGV[1] == ""
local field = removing and ARGV[2] or ARGV[1]
if removing then
  if redis.call("HDEL", KEYS[1], field) == 0 then return 0 end
elseif redis.call("HEXISTS", KEYS[1], field) == 0 then
  local max = tonumber(ARGV[4])
  local held = redis.call("HLEN", KEYS[1]) - redis.call("HEXISTS", KEYS[1], "version") - redis.call("HEXISTS", KEYS[1], "epoch")
  if held >= max then
    local all = redis.call("HGETALL", KEYS[1])
    for i = 1, #all, 2 do
      if all[i] ~= "version" and all[i] ~= "epoch" then
        local ok, held_override = pcall(cjson.decode, all[i + 1])
        if ok and type(held_override) == "table" and tonumber(held_override["until"]) ~= nil
          and tonumber(held_override["until"]) <= tonumber(ARGV[3]) then
          redis.call("HDEL", KEYS[1], all[i])
          held = held - 1
        end
      end
    end
    if held >= max then return -1 end
  end
end
if not removing then redis.call("HSET", KEYS[1], field, ARGV[2]) end
redis.call("HSETNX", KEYS[1], "epoch", ARGV[7])
redis.call("HINCRBY", KEYS[1], "version", 1)
redis.call("RPUSH", KEYS[2], ARGV[5])
redis.call("LTRIM", KEYS[2], -tonumber(ARGV[6]), -1)
return 1
`;

export class RedisOverrides implements OverrideSource {
  readonly name: string;
  readonly #client: OverrideCommands;
  readonly #hash: string;
  readonly #log: string;

  constructor(client: OverrideCommands, prefix: string, name = "redis") {
    this.#client = client;
    this.name = name;
    [this.#hash, this.#log] = overrideKeys(prefix);
  }

  async version(): Promise<string> {
    const [version, epoch] = await this.#client.hmget(this.#hash, ["version", "epoch"]);
    return `${epoch ?? "none"}/${version ?? "0"}`;
  }

  async list(): Promise<readonly Override[]> {
    const all = await this.#client.hgetall(this.#hash);
    const overrides: Override[] = [];
    for (const [field, value] of Object.entries(all)) {
      if (!field.includes(" ")) continue;
      const override = parse(value);
      if (override !== undefined) overrides.push(override);
    }
    return overrides;
  }

  async put(override: Override, now: number, max: number): Promise<void> {
    const field = fieldOf(override.subject, override.scope);
    const change = setChange(override);
    const changed = await this.#change(field, JSON.stringify(override), now, max, change);
    if (changed === -1) throw full(max);
  }

  async delete(subject: string, scope: string, change: OverrideChange): Promise<boolean> {
    return (await this.#change("", fieldOf(subject, scope), change.at, 0, change)) === 1;
  }

  async changes(count: number): Promise<readonly OverrideChange[]> {
    if (count <= 0) return [];
    const lines = await this.#client.lrange(this.#log, -count, -1);
    return lines.flatMap((line) => {
      try {
        return [JSON.parse(line) as OverrideChange];
      } catch {
        return [];
      }
    });
  }

  async #change(
    field: string,
    value: string,
    now: number,
    max: number,
    change: OverrideChange,
  ): Promise<number> {
    const epoch = `${now}.${Math.random().toString(36).slice(2)}`;
    const reply = await this.#client.eval(
      CHANGE_LUA,
      [this.#hash, this.#log],
      [
        field,
        value,
        String(now),
        String(max),
        JSON.stringify(change),
        String(OVERRIDE_LOG_SIZE),
        epoch,
      ],
    );
    if (typeof reply !== "number") {
      throw new EdgelimitError(
        "EL_STORE_FAILED",
        "redis override change returned an unexpected reply",
      );
    }
    return reply;
  }
}

/** A stored override, or undefined for a field that is not one (written by hand, damaged). */
function parse(value: string): Override | undefined {
  try {
    const override = JSON.parse(value) as Override;
    const effects = ["limit", "block", "allow"];
    if (typeof override.subject !== "string" || !effects.includes(override.effect))
      return undefined;
    return override;
  } catch {
    return undefined;
  }
}
