import type { CounterState } from "../../core/types.js";
import { decodeReply, type ScriptRequest } from "./encoding.js";

interface Queued extends ScriptRequest {
  readonly resolve: (states: CounterState[]) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * Requests that reach a single-node store in the same turn of the event loop, sent as one
 * script call (up to `maxBatch`): the script applies them one after the other, each atomically,
 * in arrival order. Nothing waits for a batch to fill; the queue is flushed by `defer`, once the
 * turn's I/O callbacks are done (`setImmediate` in Node, see blind-counting.ts for why;
 * `queueMicrotask` in a runtime without it). `send` takes the batch's keys and arguments (each
 * request's in turn).
 */
export class TickBatch {
  readonly #maxBatch: number;
  readonly #send: (keys: string[], args: string[]) => Promise<unknown>;
  readonly #defer: (flush: () => void) => void;
  #queue: Queued[] = [];

  constructor(
    maxBatch: number,
    send: (keys: string[], args: string[]) => Promise<unknown>,
    defer: (flush: () => void) => void,
  ) {
    this.#maxBatch = maxBatch;
    this.#send = send;
    this.#defer = defer;
  }

  submit(request: ScriptRequest): Promise<CounterState[]> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ keys: request.keys, args: request.args, resolve, reject });
      if (this.#queue.length === 1) this.#defer(() => this.#flush());
      else if (this.#queue.length >= this.#maxBatch) this.#flush();
    });
  }

  #flush(): void {
    const batch = this.#queue;
    if (batch.length === 0) return;
    this.#queue = [];
    const keys: string[] = [];
    const args: string[] = [];
    for (const request of batch) {
      for (const key of request.keys) keys.push(key);
      for (const arg of request.args) args.push(arg);
    }
    this.#send(keys, args).then(
      (reply) => {
        let offset = 0;
        for (const request of batch) {
          try {
            request.resolve(decodeReply(reply, offset, request.keys.length));
          } catch (error) {
            request.reject(error);
          }
          offset += request.keys.length;
        }
      },
      (error: unknown) => {
        for (const request of batch) request.reject(error);
      },
    );
  }
}
