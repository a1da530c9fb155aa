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

/**
 * The top keys of the recent past: two Space-Saving sketches, one filling and one full, swapped
 * every `periodMs` (driven by the `now` given, no timer). `top` sums both, so it covers between
 * one and two periods: an offender that stopped drops off the dashboard after at most two.
 * A key tracked in only one sketch may have been counted in the other below that sketch's
 * smallest counter, which `top` does not add (its counts are a lower bound by that much at most).
 */
export class RecentHeavyHitters {
  readonly periodMs: number;
  readonly #capacity: number;
  #current: SpaceSaving;
  #previous: SpaceSaving;
  #period: number | undefined;

  constructor(capacity = 100, periodMs = 5 * 60_000) {
    if (!Number.isFinite(periodMs) || periodMs <= 0) {
      throw new RangeError(`RecentHeavyHitters period must be positive; got ${periodMs}`);
    }
    this.#capacity = capacity;
    this.periodMs = periodMs;
    this.#current = new SpaceSaving(capacity);
    this.#previous = new SpaceSaving(capacity);
  }

  offer(key: string, now: number, weight = 1): void {
    this.#advance(now);
    this.#current.offer(key, weight);
  }

  /** The `limit` keys with the most weight over the last one to two periods, largest first. */
  top(limit: number, now: number): HeavyHitter[] {
    this.#advance(now);
    const merged = new Map<string, { count: number; error: number }>();
    for (const sketch of [this.#previous, this.#current]) {
      for (const hitter of sketch.top(this.#capacity)) {
        const seen = merged.get(hitter.key);
        if (seen === undefined)
          merged.set(hitter.key, { count: hitter.count, error: hitter.error });
        else {
          seen.count += hitter.count;
          seen.error += hitter.error;
        }
      }
    }
    const all = [...merged].map(([key, { count, error }]) => ({ key, count, error }));
    all.sort((a, b) => b.count - a.count || (a.key < b.key ? -1 : 1));
    return all.slice(0, limit);
  }

  #advance(now: number): void {
    const period = Math.floor(now / this.periodMs);
    if (this.#period === undefined) this.#period = period;
    if (period === this.#period) return;
    // One period later the filling sketch becomes the previous one; later than that, both are old.
    this.#previous = period === this.#period + 1 ? this.#current : new SpaceSaving(this.#capacity);
    this.#current = new SpaceSaving(this.#capacity);
    this.#period = period;
  }
}
