/**
 * Fixed windows without a script: each counter's window has a key of its own, holding its count
 * as a plain integer, so a request needs no read before its write. One `INCRBY` per counter
 * answers a request: it returns the count after, which no other request saw, so each counter is
 * exact under any concurrency (a cost of 0 is a `GET`: a read makes no key and sets no expiry,
 * core/peek.ts). What follows is sent without waiting, on the same connection (so
 * that this process's next command finds it applied):
 * - the key's expiry, when the `INCRBY` made the key (it answered no more than the cost):
 *   `PEXPIRE … NX` (Redis 7), once per key and window instead of once per request;
 * - a refused request given back on the counters that admitted it (`DECRBY`): meanwhile another
 *   process may find a count one request too high, never one too low, as the DynamoDB store's
 *   refunds.
 *
 * Windows are kept apart (the window is in the key's name): a request stamped in an older
 * window counts in that window's key, which a newer window never shares, so it can neither
 * reset nor shrink a newer window's count. The script counts the same keys (`w` specs,
 * `window_key` in script.ts) when a request also has sliding windows or token buckets.
 */
import type { Pipeline } from "ioredis";
import type { CounterSpec, CounterState } from "../../core/types.js";
import { LATE_GRACE_MS, windowEndOf, windowIndexAt, windowSpanOf } from "../../core/windows.js";
import type { RedisClient } from "./client.js";

/** Whether every counter of a request can be counted blindly (fixed windows only). */
export function onlyFixedWindows(counters: readonly CounterSpec[]): boolean {
  for (const counter of counters) if (counter.algorithm !== "fixed-window") return false;
  return true;
}

/**
 * The key of a counter's window: its Redis key (`redisKeyOf`), then `|w`, the window's span
 * (`windowSpanOf`: ms, or minus the months) and index. The same name as `window_key` in the
 * script; the hash tag is the counter key's, so every window of a subject shares its slot.
 */
export function windowKeyOf(counterKey: string, counter: CounterSpec, index: number): string {
  return `${counterKey}|w${windowSpanOf(counter.window)}:${index}`;
}

/**
 * The keys a reset deletes for a counter: its key (sliding windows, token buckets, states of
 * earlier versions), and for a fixed window the windows around `now`: the one before (a late
 * request may still count in it), its own, and the next (a process whose clock is ahead).
 */
export function resetKeysOf(counterKey: string, counter: CounterSpec, now: number): string[] {
  if (counter.algorithm !== "fixed-window") return [counterKey];
  const index = windowIndexAt(counter.window, now);
  return [
    counterKey,
    windowKeyOf(counterKey, counter, index - 1),
    windowKeyOf(counterKey, counter, index),
    windowKeyOf(counterKey, counter, index + 1),
  ];
}

/**
 * What a blind call found: the states, and what to send after it (the expiries of keys it made,
 * the increments of a refused request to give back), nothing when `followUp` is empty.
 */
export interface FixedWindowOutcome {
  readonly states: CounterState[];
  readonly followUp: readonly FollowUp[];
}

/**
 * A key to give an expiry (`cost` 0), or an increment to take back and the expiry again (were the
 * key gone meanwhile, `DECRBY` would make one that never expires).
 */
export interface FollowUp {
  readonly key: string;
  readonly cost: number;
  readonly ttlMs: number;
}

/** Adds follow-ups to a pipeline; the number of commands added. */
export function queueFollowUp(pipeline: Pipeline, followUp: readonly FollowUp[]): number {
  let commands = 0;
  for (const { key, cost, ttlMs } of followUp) {
    if (cost > 0) {
      pipeline.decrby(key, cost);
      commands++;
    }
    pipeline.pexpire(key, ttlMs, "NX");
    commands++;
  }
  return commands;
}

/** Sends the follow-ups of one request as one pipeline (a Cluster, or batching off). */
export function sendFollowUp(client: RedisClient, followUp: readonly FollowUp[]): Promise<unknown> {
  const pipeline = client.pipeline() as Pipeline;
  queueFollowUp(pipeline, followUp);
  return pipeline.exec();
}

/**
 * One request's fixed windows at `now` (epoch ms: the caller's, or the server's as the store
 * estimates it, `onServerClock`, which each state then carries as `storeNow` for hybrid
 * counting's reservations): one command per counter on a pipeline (`queue`), read back from its
 * replies (`settle`). `keyOf` gives a counter's Redis key.
 */
export class FixedWindowRequest {
  readonly counters: readonly CounterSpec[];
  readonly #now: number;
  readonly #onServerClock: boolean;
  readonly #keys: string[];
  readonly #ends: number[];
  readonly #ttls: number[];

  constructor(
    counters: readonly CounterSpec[],
    now: number,
    keyOf: (counter: CounterSpec) => string,
    onServerClock = false,
  ) {
    const count = counters.length;
    this.counters = counters;
    this.#now = now;
    this.#onServerClock = onServerClock;
    this.#keys = new Array(count);
    this.#ends = new Array(count);
    this.#ttls = new Array(count);
    for (let i = 0; i < count; i++) {
      const counter = counters[i] as CounterSpec;
      const index = windowIndexAt(counter.window, now);
      const end = windowEndOf(counter.window, index);
      this.#keys[i] = windowKeyOf(keyOf(counter), counter, index);
      this.#ends[i] = end;
      // A duration from the request's own time, as the script's `PX`: positive, since now < end.
      this.#ttls[i] = Math.ceil(end + LATE_GRACE_MS - now);
    }
  }

  /** The key and cost of a request's only counter. */
  only(): [key: string, cost: number] {
    return [this.#keys[0] as string, (this.counters[0] as CounterSpec).cost];
  }

  /** Commands the request adds to a pipeline: `COMMANDS_PER_COUNTER` per counter. */
  queue(pipeline: Pipeline): void {
    const keys = this.#keys;
    for (let i = 0; i < keys.length; i++) {
      const cost = (this.counters[i] as CounterSpec).cost;
      // A cost of 0 reads (a peek): `INCRBY 0` would make the key.
      if (cost === 0) pipeline.get(keys[i] as string);
      else pipeline.incrby(keys[i] as string, cost);
    }
  }

  /** The request's outcome from a pipeline's replies, its own starting at `offset`. */
  settle(replies: readonly [Error | null, unknown][], offset: number): FixedWindowOutcome {
    const counters = this.counters;
    const count = counters.length;
    const after: number[] = new Array(count);
    let admitted = true;
    for (let i = 0; i < count; i++) {
      const [error, reply] = replies[offset + COMMANDS_PER_COUNTER * i] ?? [
        new Error("redis pipeline returned too few replies"),
        undefined,
      ];
      if (error) throw error;
      const counter = counters[i] as CounterSpec;
      after[i] = Number(reply);
      if (counter.mode === "enforce" && (after[i] as number) > counter.limit) admitted = false;
    }
    const now = this.#now;
    const states: CounterState[] = new Array(count);
    const followUp: FollowUp[] = [];
    for (let i = 0; i < count; i++) {
      const counter = counters[i] as CounterSpec;
      const allowed = (after[i] as number) <= counter.limit;
      let counted = after[i] as number;
      const key = this.#keys[i] as string;
      const ttlMs = this.#ttls[i] as number;
      // Refused: only the enforcing counters that refused it, and observing ones, keep it.
      if (!admitted && allowed && counter.mode === "enforce" && counter.cost > 0) {
        counted -= counter.cost;
        followUp.push({ key, cost: counter.cost, ttlMs });
      } else if (counter.cost > 0 && counted <= counter.cost) {
        // This request made the key (or found it emptied by a give-back): it has no expiry yet.
        followUp.push({ key, cost: 0, ttlMs });
      }
      const end = this.#ends[i] as number;
      const state: CounterState = {
        allowed,
        count: counted,
        remaining: Math.max(0, counter.limit - counted),
        resetAt: end,
        retryAfterMs: allowed ? 0 : end - now,
      };
      states[i] = this.#onServerClock ? { ...state, storeNow: now } : state;
    }
    return { states, followUp };
  }
}

/** `INCRBY` (`GET` for a cost of 0). */
export const COMMANDS_PER_COUNTER = 1;

/** Sends one request's pipeline and reads its outcome (a Cluster, or batching off). */
export async function countFixedWindows(
  client: RedisClient,
  request: FixedWindowRequest,
): Promise<FixedWindowOutcome> {
  if (request.counters.length === 1) {
    // One command: a pipeline's own objects would cost the caller more than the command.
    const [key, cost] = request.only();
    const reply = cost === 0 ? await client.get(key) : await client.incrby(key, cost);
    return request.settle([[null, reply]], 0);
  }
  const pipeline = client.pipeline() as Pipeline;
  request.queue(pipeline);
  const replies = await pipeline.exec();
  if (replies === null) throw new Error("redis pipeline was discarded");
  return request.settle(replies, 0);
}
