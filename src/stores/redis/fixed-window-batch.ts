import type { Pipeline } from "ioredis";
import {
  COMMANDS_PER_COUNTER,
  type FixedWindowOutcome,
  type FixedWindowRequest,
} from "./fixed-windows.js";

interface Queued {
  readonly request: FixedWindowRequest;
  readonly resolve: (outcome: FixedWindowOutcome) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * Fixed-window requests that reach a single-node store in the same tick, sent as one pipeline
 * (up to `maxBatch` requests): one write, one read, as the script's batch (batch.ts). Each
 * request's commands are its own; nothing waits for a batch to fill (`defer` flushes the queue
 * once the current tick's work is done).
 */
export class FixedWindowBatch {
  readonly #maxBatch: number;
  readonly #pipeline: () => Pipeline;
  readonly #exec: (pipeline: Pipeline) => Promise<[Error | null, unknown][] | null>;
  readonly #defer: (flush: () => void) => void;
  readonly #sent: () => void;
  #queue: Queued[] = [];

  /**
   * `exec` sends a pipeline (the store bounds it by its call timeout: one timer per batch, not
   * per request); `sent` counts each pipeline sent (`RedisStore.roundTrips`).
   */
  constructor(
    maxBatch: number,
    pipeline: () => Pipeline,
    exec: (pipeline: Pipeline) => Promise<[Error | null, unknown][] | null>,
    defer: (flush: () => void) => void,
    sent: () => void,
  ) {
    this.#maxBatch = maxBatch;
    this.#exec = exec;
    this.#sent = sent;
    this.#pipeline = pipeline;
    this.#defer = defer;
  }

  submit(request: FixedWindowRequest): Promise<FixedWindowOutcome> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ request, resolve, reject });
      if (this.#queue.length === 1) this.#defer(() => this.#flush());
      else if (this.#queue.length >= this.#maxBatch) this.#flush();
    });
  }

  #flush(): void {
    const batch = this.#queue;
    if (batch.length === 0) return;
    this.#queue = [];
    const pipeline = this.#pipeline();
    for (const { request } of batch) request.queue(pipeline);
    this.#sent();
    this.#exec(pipeline).then(
      (replies) => {
        let offset = 0;
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
        for (const { reject } of batch) reject(error);
      },
    );
  }
}
