/**
 * The store docs/stores.md writes from the contract alone (examples/stores/), held to the same
 * rules and random histories as the stores edgelimit ships, over an in-process backend that
 * runs each transaction on its keys one at a time, with expiries.
 */
import { describe } from "vitest";
import {
  type Transaction,
  TransactionalStore,
  type Transactions,
} from "../../examples/stores/transactional-store.js";
import { describeConformance } from "../support/conformance/index.js";
import type { Target } from "../support/conformance/targets.js";

/** Values with expiries in a Map; a transaction waits for the ones before it on any of its keys. */
class LockedMap implements Transactions {
  readonly #values = new Map<string, { value: unknown; expiresAt: number }>();
  readonly #tails = new Map<string, Promise<void>>();

  async run<T>(keys: readonly string[], body: (tx: Transaction) => T): Promise<T> {
    const unique = [...new Set(keys)];
    const before = unique.map((key) => this.#tails.get(key) ?? Promise.resolve());
    let release = (): void => {};
    const done = new Promise<void>((resolve) => {
      release = resolve;
    });
    for (const key of unique) this.#tails.set(key, done);
    await Promise.all(before);
    // A round trip's worth of waiting, so that other calls interleave as they would remotely.
    await new Promise((resolve) => setImmediate(resolve));
    try {
      const now = Date.now();
      return body({
        get: (key) => {
          const held = this.#values.get(key);
          return held !== undefined && held.expiresAt > now ? held.value : undefined;
        },
        set: (key, value, ttlMs) => {
          this.#values.set(key, { value: structuredClone(value), expiresAt: now + ttlMs });
        },
        delete: (key) => {
          this.#values.delete(key);
        },
      });
    } finally {
      for (const key of unique) if (this.#tails.get(key) === done) this.#tails.delete(key);
      release();
    }
  }
}

async function exampleTarget(): Promise<Target> {
  return {
    name: "example transactional store",
    canReset: true,
    async stores(count) {
      const backend = new LockedMap();
      return Array.from({ length: count }, () => new TransactionalStore(backend));
    },
    async cleanup() {},
  };
}

describe("the store docs/stores.md writes (examples/stores/transactional-store.ts)", () => {
  describeConformance(exampleTarget, { runs: 20, maxSteps: 60 });
});
