/**
 * The script's calling convention (see script.ts): a request is its `now` followed by one
 * argument per counter, and each answer five numbers; a reply ends with the server's time when
 * the call read it.
 */
import { EdgelimitError } from "../../core/errors.js";
import type { CounterSpec, CounterState, WindowSpec } from "../../core/types.js";

const FIELDS_PER_COUNTER = 5;
/** Algorithm and mode in one letter: lower case enforces, upper case observes. */
const ALGORITHM_LETTERS = {
  enforce: { "fixed-window": "w", "sliding-window": "s", "token-bucket": "t" },
  observe: { "fixed-window": "W", "sliding-window": "S", "token-bucket": "T" },
} as const;

/** One request's keys and arguments: `now` ("" for the server's clock), then its counters. */
export interface ScriptRequest {
  readonly keys: string[];
  readonly args: string[];
}

export function encodeRequest(
  counters: readonly CounterSpec[],
  nowArgument: string,
  keyOf: (counter: CounterSpec) => string,
): ScriptRequest {
  const count = counters.length;
  const keys: string[] = new Array(count);
  const args: string[] = new Array(count + 1);
  args[0] = nowArgument;
  for (let i = 0; i < count; i++) {
    const counter = counters[i] as CounterSpec;
    keys[i] = keyOf(counter);
    args[i + 1] = specArgument(counter);
  }
  return { keys, args };
}

/**
 * The Redis key of a counter: `prefix + "{" + subject + "}" + "|namespace|scope"`. The braces are
 * a Cluster hash tag, so every counter of one subject lives in one slot.
 */
export function redisKeyOf(prefix: string, counter: CounterSpec): string {
  const rest = counter.key.startsWith(counter.subject)
    ? counter.key.slice(counter.subject.length)
    : `|${counter.key}`;
  return `${prefix}{${counter.subject}}${rest}`;
}

/**
 * "w 100 60000 1": algorithm and mode (a fixed window is `w`, counted in a key per window, the
 * same keys as fixed-windows.ts; `f`, a fixed window in the counter's own key, is what earlier
 * versions sent), limit, window, cost (the script caches it by its text).
 */
function specArgument(counter: CounterSpec): string {
  return `${ALGORITHM_LETTERS[counter.mode][counter.algorithm]} ${counter.limit} ${windowArgument(counter.window)} ${counter.cost}`;
}

function windowArgument(window: WindowSpec): string {
  return "ms" in window ? String(window.ms) : `m${window.months}`;
}

/**
 * States of `count` counters starting at counter `offset` of a script reply, each with the
 * server's time when the reply ends with it (a call that read `TIME`).
 */
export function decodeReply(reply: unknown, offset: number, count: number): CounterState[] {
  if (!Array.isArray(reply) || reply.length < (offset + count) * FIELDS_PER_COUNTER) {
    throw new EdgelimitError("EL_STORE_FAILED", "redis script returned an unexpected reply");
  }
  const timed = reply.length % FIELDS_PER_COUNTER === 1;
  const storeNow = timed ? (reply[reply.length - 1] as number) : undefined;
  const states: CounterState[] = new Array(count);
  for (let i = 0; i < count; i++) {
    const at = (offset + i) * FIELDS_PER_COUNTER;
    const retryAfterMs = reply[at + 4] as number;
    const state: CounterState = {
      allowed: reply[at] === 1,
      count: reply[at + 1] as number,
      remaining: reply[at + 2] as number,
      resetAt: reply[at + 3] as number,
      retryAfterMs: retryAfterMs < 0 ? Number.POSITIVE_INFINITY : retryAfterMs,
    };
    states[i] = timed ? { ...state, storeNow } : state;
  }
  return states;
}
