/** What an entry carries to sit in an `EntryList`. */
export interface Linked<T> {
  older: T | undefined;
  newer: T | undefined;
}

/**
 * A doubly linked list threaded through the entries themselves, oldest first: append, remove
 * and "oldest" in constant time, with no map of its own. The memory store keeps every counter
 * in one `Map` and its two eviction segments as two of these lists, so moving an entry between
 * segments never touches the map, and a lookup is one `Map.get` whichever segment holds it.
 * (Ordering by a `Map`'s insertion order instead costs a second map and, when "the oldest" is
 * read with `keys().next()`, a walk over every hole that deletions left: see git history.)
 */
export class EntryList<T extends Linked<T>> {
  #oldest: T | undefined;
  #newest: T | undefined;
  #size = 0;

  get size(): number {
    return this.#size;
  }

  get oldest(): T | undefined {
    return this.#oldest;
  }

  /** Adds `entry` as the newest; it must not be in any list. */
  append(entry: T): void {
    entry.older = this.#newest;
    entry.newer = undefined;
    if (this.#newest === undefined) this.#oldest = entry;
    else this.#newest.newer = entry;
    this.#newest = entry;
    this.#size++;
  }

  /** Takes `entry` out; it must be in this list. */
  remove(entry: T): void {
    const { older, newer } = entry;
    if (older === undefined) this.#oldest = newer;
    else older.newer = newer;
    if (newer === undefined) this.#newest = older;
    else newer.older = older;
    entry.older = undefined;
    entry.newer = undefined;
    this.#size--;
  }

  clear(): void {
    this.#oldest = undefined;
    this.#newest = undefined;
    this.#size = 0;
  }
}
