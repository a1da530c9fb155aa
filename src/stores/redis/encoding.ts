/**
 * The script's calling convention (see script.ts): each counter is five arguments after the
 * request's `now` and counter count, and each answer five numbers.
 */
import { EdgelimitError } from "../../core/errors.js";
import type { CounterSpec, CounterState, WindowSpec } from "../../core/types.js";

const FIELDS_PER_COUNTER = 5;
const ALGORITHM_CODES = {
  "fixed-window": "f",
  "sliding-window": "s",
  "token-bucket": "t",
} as const;

/** One request's keys and arguments: `now` ("" for the server's clock), the count, counters. */
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
  const args: string[] = [nowArgument, String(count)];
  for (let i = 0; i < count; i++) {
    const counter = counters[i] as CounterSpec;
    keys[i] = keyOf(counter);
    args.push(
      ALGORITHM_CODES[counter.algorithm],
      String(counter.limit),
      windowArgument(counter.window),
      String(counter.cost),
      counter.mode === "observe" ? "o" : "e",
    );
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

function windowArgument(window: WindowSpec): string {
  return "ms" in window ? String(window.ms) : `m${window.months}`;
}

/** States of `count` counters starting at counter `offset` of a script reply. */
export function decodeReply(reply: unknown, offset: number, count: number): CounterState[] {
  if (!Array.isArray(reply) || reply.length < (offset + count) * FIELDS_PER_COUNTER) {
    throw new EdgelimitError("EL_STORE_FAILED", "redis script returned an unexpected reply");
  }
  const states: CounterState[] = new Array(count);
  for (let i = 0; i < count; i++) {
    const at = (offset + i) * FIELDS_PER_COUNTER;
    const retryAfterMs = reply[at + 4] as number;
    states[i] = {
      allowed: reply[at] === 1,
      count: reply[at + 1] as number,
      remaining: reply[at + 2] as number,
      resetAt: reply[at + 3] as number,
      retryAfterMs: retryAfterMs < 0 ? Number.POSITIVE_INFINITY : retryAfterMs,
    };
  }
  return states;
}
