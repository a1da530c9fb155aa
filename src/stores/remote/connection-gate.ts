import { afterPendingIo, type StoreCallProgress } from "../../core/deadline.js";
import { EdgelimitError } from "../../core/errors.js";
import { positiveMs } from "../../core/options.js";

export interface ConnectionGateOptions {
  /** Names the store in messages (`redis`). */
  readonly name: string;
  /** How long a connection may take to become ready, from its start (default 1000 ms). */
  readonly connectTimeoutMs?: number;
  /** The client is ready already (a client passed in connected). */
  readonly ready?: boolean;
  /**
   * Called when a connection has not become ready within `connectTimeoutMs`: a server that
   * accepted and stays silent, a stalled TLS handshake. The store drops that connection and
   * starts another (a connection that never becomes ready would otherwise wait for ever).
   */
  readonly onStalled?: () => void;
}

type GateState = "first" | "ready" | "down";

const DEFAULT_CONNECT_TIMEOUT_MS = 1000;

/**
 * Whether calls may go out on a client's connection, and how long they wait for it.
 *
 * A fresh store's first calls wait for its first connection (a cold process's handshake is not
 * a failing store; the decision budget does not run meanwhile, see `StoreCallProgress`), but
 * only until `connectTimeoutMs` after the store was made: a connection that never becomes ready
 * (a listener that accepts and says nothing, a hanging DNS lookup, a stalled handshake) fails
 * them then, and every call after that fails at once until a connection is ready again. A
 * later connection that does not become ready within `connectTimeoutMs` of its start is
 * reported to `onStalled`. Calls never queue behind a connection that is not there: waiting is
 * the first connection's privilege.
 */
export class ConnectionGate {
  readonly #name: string;
  readonly #timeoutMs: number;
  readonly #onStalled: (() => void) | undefined;
  #state: GateState;
  /** Calls waiting for the first connection. */
  #waiting: { resolve: () => void; reject: (error: Error) => void }[] = [];
  #stallTimer: ReturnType<typeof setTimeout> | undefined;
  /** Why the last connection failed, for the calls that fail at once. */
  #lastProblem = "not connected yet";

  constructor(options: ConnectionGateOptions) {
    this.#name = options.name;
    this.#timeoutMs = positiveMs(
      options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
      options.name,
      "connectTimeoutMs",
    );
    this.#onStalled = options.onStalled;
    this.#state = options.ready === true ? "ready" : "first";
    if (this.#state === "first") this.attempting();
  }

  /** `connecting` until the first connection is ready or has failed, then `ready` or `down`. */
  get state(): "connecting" | "ready" | "down" {
    return this.#state === "first" ? "connecting" : this.#state;
  }

  /**
   * Undefined when calls may go out now; a promise that settles when the first connection is
   * ready (or rejects when it fails); throws `EL_STORE_FAILED` when there is no connection.
   */
  ready(progress?: StoreCallProgress): Promise<void> | undefined {
    if (this.#state === "ready") return undefined;
    if (this.#state === "down") {
      throw new EdgelimitError(
        "EL_STORE_FAILED",
        `${this.#name} is not connected (${this.#lastProblem})`,
      );
    }
    const done = progress?.connecting();
    return new Promise<void>((resolve, reject) => {
      this.#waiting.push({ resolve, reject });
    }).finally(() => done?.());
  }

  /** A connection attempt is under way (its TCP connection is up, or it has just started). */
  attempting(): void {
    if (this.#stallTimer !== undefined) return;
    const timer = setTimeout(() => {
      // A ready event already read from the socket is handled first: not a stall.
      afterPendingIo(() => {
        if (this.#stallTimer !== timer) return;
        this.#stallTimer = undefined;
        if (this.#state === "ready") return;
        this.#fail(`no connection ready within ${this.#timeoutMs} ms`);
        this.#onStalled?.();
      });
    }, this.#timeoutMs);
    // Only a connection's own life keeps the process up, not its watchdog.
    (timer as { unref?: () => void }).unref?.();
    this.#stallTimer = timer;
  }

  /** The connection is ready: calls go out. */
  connected(): void {
    this.#clearStallTimer();
    this.#state = "ready";
    const waiting = this.#waiting;
    this.#waiting = [];
    for (const waiter of waiting) waiter.resolve();
  }

  /**
   * The connection closed or failed to open. Calls fail at once until the next `connected`;
   * the first connection's waiters fail now (ioredis tries again in the background).
   */
  lost(problem: string): void {
    this.#clearStallTimer();
    this.#fail(problem);
  }

  /** Stops the watchdog (the store is closing). */
  close(): void {
    this.#clearStallTimer();
    this.#fail("closed");
  }

  #fail(problem: string): void {
    this.#lastProblem = problem;
    this.#state = "down";
    const waiting = this.#waiting;
    this.#waiting = [];
    const error = new EdgelimitError(
      "EL_STORE_FAILED",
      `${this.#name} connection failed before it was ready (${problem})`,
    );
    for (const waiter of waiting) waiter.reject(error);
  }

  #clearStallTimer(): void {
    if (this.#stallTimer === undefined) return;
    clearTimeout(this.#stallTimer);
    this.#stallTimer = undefined;
  }
}
