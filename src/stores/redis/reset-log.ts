/**
 * The log of resets that lets every process's block cache hear of another process's
 * `limiter.reset` (core/reset-watch.ts), for both Redis stores. Two keys beside the counters,
 * in one Cluster slot (`{resets}`): a hash with the log's epoch and the number of keys ever
 * logged, and a list of the last RESET_LOG_SIZE counter keys reset. A reset appends its keys
 * once it has deleted them, so a reader that sees them finds the counters gone; a reader asks
 * for what came after its mark (`epoch/sequence`): one `HMGET`, no script, while nothing was
 * reset (nearly always), and a script that reads the keys when something was. The list is
 * bounded and neither key expires:
 * a reader more than RESET_LOG_SIZE keys behind, or one whose epoch is gone (a flushed or
 * restarted Redis), is told `all` and forgets every block.
 */
import { EdgelimitError } from "../../core/errors.js";
import type { CounterSpec, ResetsSince } from "../../core/types.js";

/** Keys kept in the log: more resets than this between two reads of a process forget all. */
export const RESET_LOG_SIZE = 1000;

/** The log's two keys under a store's prefix: they cannot be a counter's (`{subject}|…`). */
export function resetLogKeys(prefix: string): [string, string] {
  return [`${prefix}{resets}state`, `${prefix}{resets}log`];
}

/** A new log's epoch: the server's time, so that a log made again after a flush is another. */
const EPOCH = `
local function epoch_of(state)
  local epoch = redis.call("HGET", state, "epoch")
  if epoch then return epoch end
  local time = redis.call("TIME")
  epoch = time[1] .. "." .. time[2]
  redis.call("HSET", state, "epoch", epoch)
  return epoch
end
`;

/** KEYS: state, log. ARGV: size, then the counter keys reset. Returns the new sequence. */
export const APPEND_RESETS_LUA = `${EPOCH}
epoch_of(KEYS[1])
local sequence = redis.call("HINCRBY", KEYS[1], "sequence", #ARGV - 1)
for i = 2, #ARGV do redis.call("RPUSH", KEYS[2], ARGV[i]) end
redis.call("LTRIM", KEYS[2], -tonumber(ARGV[1]), -1)
return sequence
`;

/**
 * KEYS: state, log. ARGV: the reader's mark ("" for none). Returns the epoch, the sequence, 1
 * when the reader must forget all (else 0), then the keys reset since the mark.
 */
export const READ_RESETS_LUA = `${EPOCH}
local epoch = epoch_of(KEYS[1])
local sequence = tonumber(redis.call("HGET", KEYS[1], "sequence") or "0")
local mark_epoch, mark = string.match(ARGV[1], "^(.*)/(%d+)$")
mark = tonumber(mark)
if mark_epoch ~= epoch or mark == nil or mark > sequence then return { epoch, sequence, 1 } end
local missed = sequence - mark
if missed == 0 then return { epoch, sequence, 0 } end
if missed > redis.call("LLEN", KEYS[2]) then return { epoch, sequence, 1 } end
local reply = redis.call("LRANGE", KEYS[2], -missed, -1)
table.insert(reply, 1, 0)
table.insert(reply, 1, sequence)
table.insert(reply, 1, epoch)
return reply
`;

/** The arguments of APPEND_RESETS_LUA after its keys: what the counters' reset appends. */
export function appendArguments(counters: readonly CounterSpec[]): string[] {
  return [String(RESET_LOG_SIZE), ...counters.map((counter) => counter.key)];
}

/** The mark of a store where nothing was ever reset (or the log was flushed). */
const NO_LOG = "none/0";

/**
 * The resets since `mark`: `readState` is `HMGET state epoch sequence`, `readLog` runs
 * READ_RESETS_LUA with the mark (only when the state says something was reset since).
 */
export async function readResets(
  mark: string | undefined,
  readState: () => Promise<readonly unknown[]>,
  readLog: (mark: string) => Promise<unknown>,
): Promise<ResetsSince> {
  const [epoch, sequence] = await readState();
  if (epoch === null || epoch === undefined) {
    // No log: nothing was reset since a mark of no log; after any other, the log was flushed.
    return mark === NO_LOG ? { mark, keys: [] } : { mark: NO_LOG, keys: "all" };
  }
  if (mark === `${String(epoch)}/${String(sequence ?? 0)}`) return { mark, keys: [] };
  // A log made since the reader saw none holds nothing older than the reader's mark.
  return decodeResets(await readLog(mark === NO_LOG ? `${String(epoch)}/0` : (mark ?? "")));
}

/** READ_RESETS_LUA's reply, read. */
function decodeResets(reply: unknown): ResetsSince {
  if (!Array.isArray(reply) || reply.length < 3) {
    throw new EdgelimitError("EL_STORE_FAILED", "redis reset log returned an unexpected reply");
  }
  const [epoch, sequence, all, ...keys] = reply as [unknown, unknown, unknown, ...unknown[]];
  return {
    mark: `${String(epoch)}/${String(sequence)}`,
    keys: all === 1 ? "all" : keys.map(String),
  };
}
