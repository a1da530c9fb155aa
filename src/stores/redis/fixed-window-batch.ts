import type { Pipeline } from "ioredis";
import {
  COMMANDS_PER_COUNTER,
  type FixedWindowOutcome,
  type FixedWindowRequest,
  type FollowUp,
  queueFollowUp,
} from "./fixed-windows.js";

interface Queued {
  readonly request: FixedWindowRequest;
  readonly resolve: (outcome: FixedWindowOutcome) => void;
  readonly reject: (error: unknown) => void;
}

type Replies = [Error | null, unknown][] | null;

export interface FixedWindowBatchOptions {
  /** Requests in one pipeline at most. */
  readonly maxBatch: number;
  readonly pipeline: () => Pipeline;
  /** Sends a pipeline (the store bounds it by its call timeout: one timer per pipeline). */
  readonly exec: (pipeline: Pipeline) => Promise<Replies>;
  /** Runs once this turn's I/O callbacks are done (`setImmediate`): flushes the requests. */
  readonly defer: (flush: () => void) => void;
  /** Runs after the next tick's I/O callbacks (`setImmediate`): flushes lone follow-ups. */
  readonly later: (flush: () => void) => void;
  /** Counts each pipeline of requests sent (`RedisStore.roundTrips`). */
  readonly sent: () => void;
  /** Counts a follow-up that failed (`RedisStore.followUpFailures`). */
  readonly followUpFailed: () => void;
}

/**
 * Fixed-window requests that reach a single-node store in the same turn of the event loop, sent
 * as one pipeline (up to `maxBatch` requests): one write, one read, as the script's batch
 * (batch.ts). Each request's commands are its own; nothing waits for a batch to fill (`defer`
 * flushes the queue once the turn's I/O callbacks are done).
 *
 * Follow-ups (a new key's expiry, a refused request's give-back) ride at the head of the next
 * pipeline of requests, or go on their own once the tick after has run (`later`) if no request
 * came: a caller that decides one request after another costs Redis one read and one write per
 * decision, not two. Either way they go before anything this process sends after them.
 */
export class FixedWindowBatch {
  readonly #options: FixedWindowBatchOptions;
  #queue: Queued[] = [];
  #followUps: FollowUp[] = [];
  #followUpsScheduled = false;

  constructor(options: FixedWindowBatchOptions) {
    this.#options = options;
  }

  submit(request: FixedWindowRequest): Promise<FixedWindowOutcome> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ request, resolve, reject });
      if (this.#queue.length === 1) this.#options.defer(() => this.#flush());
      else if (this.#queue.length >= this.#options.maxBatch) this.#flush();
    });
  }

  followUp(items: readonly FollowUp[]): void {
    for (const item of items) this.#followUps.push(item);
    if (this.#followUpsScheduled) return;
    this.#followUpsScheduled = true;
    this.#options.later(() => {
      this.#followUpsScheduled = false;
      this.flushFollowUps();
    });
  }

  /** Sends the waiting follow-ups now (before a reset's `DEL`, which must come after them). */
  flushFollowUps(): void {
    if (this.#followUps.length === 0) return;
    const pipeline = this.#options.pipeline();
    const ahead = this.#takeFollowUps(pipeline);
    this.#options.exec(pipeline).then(
      (replies) => this.#checkFollowUps(replies, ahead),
      () => this.#failFollowUps(ahead),
    );
  }

  /** Queues the waiting follow-ups on `pipeline`; the number of commands queued. */
  #takeFollowUps(pipeline: Pipeline): number {
    if (this.#followUps.length === 0) return 0;
    const commands = queueFollowUp(pipeline, this.#followUps);
    this.#followUps = [];
    return commands;
  }

  #checkFollowUps(replies: Replies, commands: number): void {
    if (replies === null) {
      this.#failFollowUps(commands);
      return;
    }
    for (let i = 0; i < commands; i++) if (replies[i]?.[0]) this.#options.followUpFailed();
  }

  #failFollowUps(commands: number): void {
    for (let i = 0; i < commands; i++) this.#options.followUpFailed();
  }

  #flush(): void {
    const batch = this.#queue;
    if (batch.length === 0) return;
    this.#queue = [];
    const pipeline = this.#options.pipeline();
    const ahead = this.#takeFollowUps(pipeline);
    for (const { request } of batch) request.queue(pipeline);
    this.#options.sent();
    this.#options.exec(pipeline).then(
      (replies) => {
        this.#checkFollowUps(replies, ahead);
        let offset = ahead;
        for (const { request, resolve, reject } of batch) {
          try {
            if (replies === null) throw new Error("redis pipeline was discarded");
            resolve(request.settle(replies, offset));
          } catch (error) {
            reject(error);
          }
          offset += COMMANDS_PER_COUNTER * request.counters.length;
        }
      },
      (error: unknown) => {
        this.#failFollowUps(ahead);
        for (const { reject } of batch) reject(error);
      },
    );
  }
}
