/**
 * A store written from the contract alone (docs/stores.md): counters kept in any backend that
 * can run a transaction over a few keys (PostgreSQL's SELECT ... FOR UPDATE, FoundationDB, a
 * Durable Object's storage), applied with edgelimit's own algorithms and three steps
 * (`applyCounters`). test/conformance/ holds it to the same rules and random histories as the
 * stores edgelimit ships.
 */
import {
  applyCounters,
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
      // The contract's three steps, edgelimit's own: read every counter, decide, write what
      // counts the request. The store's part is where states live and how long they are kept.
      const { states } = applyCounters(counters, now, {
        get: (counter) => tx.get(counter.key),
        set: (counter, state, expiresAt) => {
          // Kept a little past its expiry, for a request that reaches the store late.
          const ttlMs = expiresAt + LATE_GRACE_MS - now;
          if (ttlMs > 0) tx.set(counter.key, state, ttlMs);
          else tx.delete(counter.key);
        },
      });
      return states;
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
