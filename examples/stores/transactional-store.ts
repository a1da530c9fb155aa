/**
 * A store written from the contract alone (docs/stores.md): counters kept in any backend that
 * can run a transaction over a few keys (PostgreSQL's SELECT ... FOR UPDATE, FoundationDB, a
 * Durable Object's storage), applied with edgelimit's own algorithms. test/conformance/ holds it
 * to the same rules and random histories as the stores edgelimit ships.
 */
import {
  ALGORITHMS,
  type CounterSpec,
  type CounterState,
  LATE_GRACE_MS,
  type Store,
} from "edgelimit";

/** What the backend must offer: a transaction over some keys, their values, and expiries. */
export interface Transactions {
  run<T>(keys: readonly string[], body: (tx: Transaction) => T): Promise<T>;
}

export interface Transaction {
  get(key: string): unknown;
  /**
   * Stores a value for `ttlMs`, a duration: the backend applies it on its own clock, so a
   * caller whose clock is behind never writes an expiry that is already past.
   */
  set(key: string, value: unknown, ttlMs: number): void;
  delete(key: string): void;
}

export class TransactionalStore implements Store {
  readonly name = "transactional";
  readonly #backend: Transactions;

  constructor(backend: Transactions) {
    this.#backend = backend;
  }

  apply(counters: readonly CounterSpec[], now: number): Promise<CounterState[]> {
    const keys = counters.map((counter) => counter.key);
    return this.#backend.run(keys, (tx) => {
      // 1. Would each counter allow the request? The request is admitted if every enforcing one does.
      const states = counters.map((counter) => tx.get(counter.key));
      const allows = counters.map((counter, i) =>
        ALGORITHMS[counter.algorithm].allows(states[i], now, counter),
      );
      const admitted = counters.every((counter, i) => counter.mode === "observe" || allows[i]);
      // 2. Count it: on every counter when admitted; otherwise only where it was refused, and
      //    always on observing (shadow) counters.
      return counters.map((counter, i) => {
        const algorithm = ALGORITHMS[counter.algorithm];
        const ok = allows[i] as boolean;
        let state = states[i];
        // A cost of 0 reads (limiter.peek): nothing is written.
        if (counter.cost > 0 && (admitted || !ok || counter.mode === "observe")) {
          state = algorithm.count(state, now, counter, ok);
          // Kept a little past its expiry, for a request that reaches the store late.
          const ttlMs = algorithm.expiresAt(state, now, counter) + LATE_GRACE_MS - now;
          if (ttlMs > 0) tx.set(counter.key, state, ttlMs);
          else tx.delete(counter.key);
        }
        // 3. The answer.
        return algorithm.describe(state, now, counter, ok);
      });
    });
  }

  reset(counters: readonly CounterSpec[]): Promise<void> {
    return this.#backend.run(
      counters.map((counter) => counter.key),
      (tx) => {
        for (const counter of counters) tx.delete(counter.key);
      },
    );
  }
}
