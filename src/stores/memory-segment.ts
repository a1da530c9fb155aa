/**
 * An insertion-ordered map whose oldest entry is found in amortised constant time.
 *
 * `map.keys().next()` looks cheap but is not: V8 leaves a hole in a Map's ordered table for
 * every deleted entry until the next rehash, and a fresh iterator walks every hole from the
 * front. Evicting "the oldest" that way costs time proportional to everything evicted before,
 * which a flood of fresh keys turns into a CPU denial of service. Here one long-lived iterator
 * (V8 keeps it valid across deletions and rehashes) moves forward only past entries that are
 * gone, so each hole is walked once.
 */
export class Segment<V extends { seq: number }> {
  readonly #map = new Map<string, V>();
  #cursor: IterableIterator<[string, V]> = this.#map.entries();
  #head: { key: string; value: V; seq: number } | undefined;
  #nextSeq = 0;

  get size(): number {
    return this.#map.size;
  }

  get(key: string): V | undefined {
    return this.#map.get(key);
  }

  has(key: string): boolean {
    return this.#map.has(key);
  }

  /** Appends `value` as the newest entry (the key must not be present). */
  append(key: string, value: V): void {
    value.seq = this.#nextSeq++;
    this.#map.set(key, value);
  }

  delete(key: string): boolean {
    return this.#map.delete(key);
  }

  /** The oldest entry, left in place. */
  oldest(): { key: string; value: V } | undefined {
    for (;;) {
      const head = this.#head;
      // Still there, and not re-appended since (a moved entry is met again further on).
      if (
        head !== undefined &&
        this.#map.get(head.key) === head.value &&
        head.value.seq === head.seq
      ) {
        return head;
      }
      this.#head = undefined;
      let step = this.#cursor.next();
      if (step.done) {
        // Every entry the cursor passed is gone: the map is empty, or was cleared.
        if (this.#map.size === 0) return undefined;
        this.#cursor = this.#map.entries();
        step = this.#cursor.next();
        if (step.done) return undefined;
      }
      const [key, value] = step.value;
      this.#head = { key, value, seq: value.seq };
    }
  }

  clear(): void {
    this.#map.clear();
    this.#cursor = this.#map.entries();
    this.#head = undefined;
  }
}
