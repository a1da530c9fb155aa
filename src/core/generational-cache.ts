/**
 * A bounded cache for a stream of mostly new keys (one per client): two maps, the young one
 * filled until it holds `keysPerGeneration`, then it becomes the old one and the previous old
 * one is dropped whole. A hit in the old map is copied to the young one, so busy keys survive;
 * the last `keysPerGeneration` distinct keys are always held, and never more than twice that.
 *
 * Why not one Map evicting its oldest key: V8's Map leaves a hole for every deleted entry
 * until its next rehash, and `keys().next()` walks over all of them, so first-in-first-out
 * eviction costs time proportional to the bound on every insert (measured: 15x slower at
 * 10,000 keys, the largest cost of a request from a new client).
 */
export class GenerationalCache<V, K = string> {
  readonly #keysPerGeneration: number;
  #young = new Map<K, V>();
  #old = new Map<K, V>();

  constructor(keysPerGeneration: number) {
    this.#keysPerGeneration = Math.max(1, Math.floor(keysPerGeneration));
  }

  get(key: K): V | undefined {
    const young = this.#young.get(key);
    if (young !== undefined) return young;
    const old = this.#old.get(key);
    if (old !== undefined) this.set(key, old);
    return old;
  }

  set(key: K, value: V): void {
    if (this.#young.size >= this.#keysPerGeneration) {
      this.#old = this.#young;
      this.#young = new Map();
    }
    this.#young.set(key, value);
  }

  /** Forgets a key in both generations. */
  delete(key: K): void {
    this.#young.delete(key);
    this.#old.delete(key);
  }

  /** Forgets every key. */
  clear(): void {
    this.#young = new Map();
    this.#old = new Map();
  }

  /** Entries held, a key present in both generations counted twice. */
  get size(): number {
    return this.#young.size + this.#old.size;
  }
}
