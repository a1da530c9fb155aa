/**
 * A bounded cache for a stream of mostly new keys (one per client): two maps, the young one
 * filled until it holds `keysPerGeneration`, then it becomes the old one and the previous old
 * one is dropped whole. A hit in the old map is copied to the young one, so busy keys survive;
 * the last `keysPerGeneration` distinct keys are always held, and never more than twice that.
 *
 *
 * String keys are bounded by their length too: a generation also turns once its keys hold
 * `CHARS_PER_KEY` characters per key on average (a client may choose a key's length: a 64 KiB
 * descriptor value, a 16 KiB path), so memory stays bounded in bytes, not only in entries, while
 * keys of usual lengths never reach it.
 *
 * Why not one Map evicting its oldest key: with a new key on every insert (a new client per
 * request), finding the oldest key gets slower as deleted entries pile up, and becomes the
 * largest cost of a request from a new client; `bench/bounded-cache.bench.ts` measures both
 * (docs/benchmarks.md, "Bounded caches").
 */
/** The average key length a generation holds before it turns (see the class's comment). */
export const CHARS_PER_KEY = 512;

export class GenerationalCache<V, K = string> {
  readonly #keysPerGeneration: number;
  readonly #charsPerGeneration: number;
  #young = new Map<K, V>();
  #old = new Map<K, V>();
  #youngChars = 0;

  constructor(keysPerGeneration: number) {
    this.#keysPerGeneration = Math.max(1, Math.floor(keysPerGeneration));
    this.#charsPerGeneration = this.#keysPerGeneration * CHARS_PER_KEY;
  }

  get(key: K): V | undefined {
    const young = this.#young.get(key);
    if (young !== undefined) return young;
    const old = this.#old.get(key);
    if (old !== undefined) this.set(key, old);
    return old;
  }

  set(key: K, value: V): void {
    if (
      this.#young.size >= this.#keysPerGeneration ||
      this.#youngChars >= this.#charsPerGeneration
    ) {
      this.#old = this.#young;
      this.#young = new Map();
      this.#youngChars = 0;
    }
    const before = this.#young.size;
    this.#young.set(key, value);
    // Only a new key adds its length: a busy key set on every request turns nothing.
    if (this.#young.size > before && typeof key === "string") this.#youngChars += key.length;
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
    this.#youngChars = 0;
  }

  /** Entries held, a key present in both generations counted twice. */
  get size(): number {
    return this.#young.size + this.#old.size;
  }
}
