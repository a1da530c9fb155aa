/** One tracked key: `count` may over-estimate the true count by at most `error`. */
export interface HeavyHitter {
  readonly key: string;
  readonly count: number;
  readonly error: number;
}

interface Slot {
  count: number;
  error: number;
}

/**
 * Space-Saving (Metwally, Agrawal, El Abbadi, 2005): the top keys of an unbounded stream in
 * `capacity` slots. Any key seen more than total / capacity times is guaranteed to be tracked,
 * so a flood of one-off keys cannot hide a heavy offender. An untracked key takes the slot of
 * the smallest counter and inherits its count as its possible error.
 */
export class SpaceSaving {
  readonly capacity: number;
  readonly #slots = new Map<string, Slot>();
  #total = 0;

  constructor(capacity = 100) {
    if (!Number.isInteger(capacity) || capacity < 1) {
      throw new RangeError(`SpaceSaving capacity must be a positive integer; got ${capacity}`);
    }
    this.capacity = capacity;
  }

  /** Units offered since start (or the last `clear`). */
  get total(): number {
    return this.#total;
  }

  get size(): number {
    return this.#slots.size;
  }

  offer(key: string, weight = 1): void {
    this.#total += weight;
    const slot = this.#slots.get(key);
    if (slot !== undefined) {
      slot.count += weight;
      return;
    }
    if (this.#slots.size < this.capacity) {
      this.#slots.set(key, { count: weight, error: 0 });
      return;
    }
    let minKey: string | undefined;
    let minSlot: Slot | undefined;
    for (const [candidateKey, candidate] of this.#slots) {
      if (minSlot === undefined || candidate.count < minSlot.count) {
        minKey = candidateKey;
        minSlot = candidate;
      }
    }
    if (minKey === undefined || minSlot === undefined) return;
    this.#slots.delete(minKey);
    this.#slots.set(key, { count: minSlot.count + weight, error: minSlot.count });
  }

  /** The `limit` largest counters, largest first. */
  top(limit = 10): HeavyHitter[] {
    const all: HeavyHitter[] = [];
    for (const [key, slot] of this.#slots) all.push({ key, count: slot.count, error: slot.error });
    all.sort((a, b) => b.count - a.count || (a.key < b.key ? -1 : 1));
    return all.slice(0, limit);
  }

  clear(): void {
    this.#slots.clear();
    this.#total = 0;
  }
}
