import { EdgelimitError } from "../core/errors.js";
import { checkOptions, type OptionsShape } from "../core/options.js";
import type { CounterSpec, CounterState, Store, StoreTraits } from "../core/types.js";
import { LATE_GRACE_MS } from "../core/windows.js";
import { IN_PLACE_ALGORITHMS as ALGORITHMS, type InPlaceAlgorithm } from "./memory-in-place.js";
import { EntryList } from "./memory-list.js";
import { heldOverrides } from "./memory-overrides.js";

export interface MemoryStoreOptions {
  /**
   * Most counters held at once (default 1,000,000: about 280 MB of heap when full, measured by
   * bench/memory-size.bench.ts).
   */
  readonly maxKeys?: number;
  /**
   * Most bytes the counters take, by estimate: `ENTRY_BYTES` each, and two bytes for each
   * character of its key (default 512 for each of `maxKeys`: 512 MB at the default). Keys are
   * short in a policy, where `maxKeys` binds first; it is what bounds counters whose keys carry
   * a caller's values (rls descriptors).
   */
  readonly maxBytes?: number;
}

const MEMORY_STORE_OPTIONS = {
  maxKeys: "number",
  maxBytes: "number",
} satisfies OptionsShape<MemoryStoreOptions>;

// biome-ignore lint/suspicious/noExplicitAny: each algorithm's own state, opaque here.
type EntryState = any;

/**
 * An entry is the algorithm's state object itself with the store's bookkeeping beside it: one
 * object per key, so a hit follows one pointer from the map, not two.
 */
interface Bookkeeping {
  /** The key it is stored under. */
  readonly key: string;
  /**
   * The algorithm whose state it is: a hit needs no lookup by name, and a counter whose rule
   * changed algorithm (a policy reload) starts afresh instead of misreading another's state.
   */
  readonly algorithm: InPlaceAlgorithm<EntryState>;
  /** The store holding it; cleared when it is dropped (an entry evicted mid-call is not counted in). */
  owner: MemoryStore | undefined;
  expiresAt: number;
  /** Second-chance bit: set on every hit, cleared when the clock hand passes. */
  referenced: boolean;
  /** In the protected segment (seen at least twice). */
  hot: boolean;
  /** Neighbours in its segment's list (see EntryList). */
  older: Entry | undefined;
  newer: Entry | undefined;
}

type Entry = EntryState & Bookkeeping;

/** The state fields of every algorithm, which a new entry declares up front (see `#count`). */
export const ENTRY_STATE_FIELDS = ["index", "count", "previous", "span", "tat"] as const;

const DEFAULT_MAX_KEYS = 1_000_000;
/**
 * An entry and its map slot, without its key: bench/memory-size.bench.ts measures about 270
 * bytes a counter with a policy's short keys, the key included.
 */
export const ENTRY_BYTES = 240;
const DEFAULT_BYTES_PER_KEY = 512;
const PROTECTED_SHARE = 0.8;
const SWEEP_PER_INSERT = 2;
const SECOND_CHANCE_SCAN = 16;

/**
 * Counters in this process: bounded, no timer per key, exact.
 *
 * Eviction is segmented so that a flood of fresh keys cannot flush a busy attacker's counter:
 * a key enters `probation` on its first request and moves to `protected` on its second. New
 * keys only ever evict other probation keys. Protected keys are demoted with a second-chance
 * clock, so a key that keeps being hit keeps its count. To reset a counter by eviction, an
 * attacker must leave it idle and meanwhile hit 80% of `maxKeys` distinct subjects twice each.
 * An expired entry is counted afresh in place when its key comes back, and dropped by a small
 * sweep on every insert when it does not.
 */
export class MemoryStore implements Store {
  readonly name = "memory";
  /** The limiter calls `applySync` itself: no promise, no timer, no block cache. */
  readonly traits: StoreTraits = {
    applySync: (counters, now) => this.applySync(counters, now),
  };
  readonly maxKeys: number;
  readonly maxBytes: number;
  readonly #protectedCap: number;
  readonly #protectedByteCap: number;
  /** Estimated bytes of every entry, and of the protected ones (see `maxBytes`). */
  #bytes = 0;
  #protectedBytes = 0;
  /** Every counter, whichever segment it is in. */
  readonly #entries = new Map<string, Entry>();
  readonly #probation = new EntryList<Entry>();
  readonly #protected = new EntryList<Entry>();
  /** Evictions of unexpired counters since start: a sign that `maxKeys` is too small. */
  evictions = 0;
  /** Overrides in this process, shared by every limiter on this store (memory-overrides.ts). */
  readonly overrides = heldOverrides();

  constructor(options: MemoryStoreOptions = {}) {
    if (typeof EDGELIMIT_BUNDLE === "undefined")
      checkOptions("memoryStore", options, MEMORY_STORE_OPTIONS, { code: "EL_STORE_OPTION" });
    const maxKeys = options.maxKeys ?? DEFAULT_MAX_KEYS;
    if (!Number.isInteger(maxKeys) || maxKeys < 2) {
      throw new EdgelimitError(
        "EL_STORE_OPTION",
        `memoryStore: maxKeys must be an integer of at least 2; got ${maxKeys}`,
      );
    }
    const maxBytes = options.maxBytes ?? maxKeys * DEFAULT_BYTES_PER_KEY;
    if (!Number.isInteger(maxBytes) || maxBytes < 2 * ENTRY_BYTES) {
      throw new EdgelimitError(
        "EL_STORE_OPTION",
        `memoryStore: maxBytes must be an integer of at least ${2 * ENTRY_BYTES}; got ${maxBytes}`,
      );
    }
    this.maxKeys = maxKeys;
    this.maxBytes = maxBytes;
    this.#protectedCap = Math.max(1, Math.floor(maxKeys * PROTECTED_SHARE));
    this.#protectedByteCap = Math.floor(maxBytes * PROTECTED_SHARE);
  }

  /** Estimated bytes the counters take (see `maxBytes`). */
  get bytes(): number {
    return this.#bytes;
  }

  get size(): number {
    return this.#entries.size;
  }

  apply(counters: readonly CounterSpec[], now: number): Promise<CounterState[]> {
    try {
      return Promise.resolve(this.applySync(counters, now));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * The contract's three steps (`applyCounters` in core/algorithms/apply.ts), tuned for this
   * store: test/conformance/memory-tuned.test.ts holds the two to the same answers.
   */
  applySync(counters: readonly CounterSpec[], now: number): CounterState[] {
    if (counters.length === 1) return [this.applyOneSync(counters[0] as CounterSpec, now)];
    const count = counters.length;
    const entries: (Entry | undefined)[] = new Array(count);
    const allowed: boolean[] = new Array(count);
    let admitted = true;
    for (let i = 0; i < count; i++) {
      const spec = counters[i] as CounterSpec;
      const entry = this.#lookup(spec);
      entries[i] = entry;
      const algorithm = entry === undefined ? ALGORITHMS[spec.algorithm] : entry.algorithm;
      const ok = algorithm.allows(entry, now, spec);
      allowed[i] = ok;
      if (!ok && spec.mode === "enforce") admitted = false;
    }
    const results: CounterState[] = new Array(count);
    for (let i = 0; i < count; i++) {
      const spec = counters[i] as CounterSpec;
      let entry = entries[i];
      const algorithm = entry === undefined ? ALGORITHMS[spec.algorithm] : entry.algorithm;
      const ok = allowed[i] as boolean;
      // Evicted by another counter's insert earlier in this batch: counted afresh, never in
      // an entry that no list or map holds any more.
      if (entry !== undefined && entry.owner !== this) entry = undefined;
      // A cost of 0 reads: it makes, moves and writes no entry (core/peek.ts).
      if (spec.cost > 0 && (admitted || !ok || spec.mode === "observe")) {
        if (entry !== undefined && algorithm.countInPlace !== undefined) {
          // Its `allowed` is `allows` again on the same state: the first phase's `ok`.
          results[i] = algorithm.countInPlace(entry, now, spec);
          entry.expiresAt = algorithm.expiresAt(entry, now, spec);
          // A busy key is hot already: no call.
          if (entry.hot) entry.referenced = true;
          else this.#touch(entry);
          continue;
        }
        entry = this.#count(spec, algorithm, entry, ok, now);
      }
      results[i] = algorithm.describe(entry, now, spec, ok);
    }
    return results;
  }

  /*
   * Entries keep the algorithm's state in their own fields (copied with the algorithm's
   * `assign`, or counted in place), never the object `count` returned: busy keys then allocate
   * nothing that lives (bench/core.bench.ts, the memory store rows).
   */

  /**
   * One counter, synchronously: what `applySync([counter], now)` answers, without the arrays
   * (the three phases fold into one when there is nothing else to agree with).
   */
  applyOneSync(spec: CounterSpec, now: number): CounterState {
    const entry = this.#entries.get(spec.key);
    if (entry !== undefined && spec.cost > 0) {
      const algorithm = entry.algorithm;
      if (algorithm.countInPlace !== undefined && algorithm.name === spec.algorithm) {
        // A lone counter is always counted, so the three phases fold into one step in place.
        // Expired or not (see #lookup): a returning client's new window reuses its entry.
        const result = algorithm.countInPlace(entry, now, spec);
        entry.expiresAt = algorithm.expiresAt(entry, now, spec);
        if (entry.hot) entry.referenced = true;
        else this.#touch(entry);
        return result;
      }
    }
    // New keys and algorithms without an in-place step take the three steps.
    return this.#applyOneSlowly(spec, ALGORITHMS[spec.algorithm], now);
  }

  #applyOneSlowly(
    spec: CounterSpec,
    algorithm: InPlaceAlgorithm<EntryState>,
    now: number,
  ): CounterState {
    const found = this.#lookup(spec);
    const ok = algorithm.allows(found, now, spec);
    const entry = spec.cost > 0 ? this.#count(spec, algorithm, found, ok, now) : found;
    return algorithm.describe(entry, now, spec, ok);
  }

  /**
   * Counts a request with the algorithm's pure `count` and keeps the result: a new entry copies
   * the state, an existing one has it written into the state object it already holds (replacing
   * that object would promote a fresh one to the old generation on every request to a busy key).
   */
  #count(
    spec: CounterSpec,
    algorithm: InPlaceAlgorithm<EntryState>,
    entry: Entry | undefined,
    allowed: boolean,
    now: number,
  ): Entry {
    const state = algorithm.count(entry, now, spec, allowed);
    const expiresAt = algorithm.expiresAt(state, now, spec);
    if (entry === undefined) {
      const created: Entry = {
        key: spec.key,
        algorithm,
        owner: this,
        expiresAt,
        referenced: false,
        hot: false,
        older: undefined,
        newer: undefined,
        // Every algorithm's state fields (ENTRY_STATE_FIELDS), declared up front: the memory
        // store rows of bench/core.bench.ts are faster with them than with fields added later.
        index: undefined,
        count: undefined,
        previous: undefined,
        span: undefined,
        tat: undefined,
      };
      algorithm.assign(created, state);
      this.#insert(created, now);
      return created;
    }
    algorithm.assign(entry, state);
    entry.expiresAt = expiresAt;
    this.#touch(entry);
    return entry;
  }

  /** Drops every counter (tests, and a policy reload that wants a clean slate). */
  clear(): void {
    // An entry a call still holds must not stay ours, nor keep the others through its links.
    for (const entry of this.#entries.values()) {
      entry.owner = undefined;
      entry.older = undefined;
      entry.newer = undefined;
    }
    this.#entries.clear();
    this.#probation.clear();
    this.#protected.clear();
    this.#bytes = 0;
    this.#protectedBytes = 0;
  }

  async reset(counters: readonly CounterSpec[]): Promise<void> {
    for (const counter of counters) {
      const entry = this.#entries.get(counter.key);
      if (entry !== undefined) this.#drop(entry);
    }
  }

  async close(): Promise<void> {
    this.clear();
  }

  /**
   * The counter's entry, expired or not. An expired state carries no information (see
   * `Algorithm.expiresAt`): every step on it answers as on no state at all, so a returning
   * client is counted in the entry it already has, instead of having it dropped from the map
   * and a new one inserted at every window (a map delete and insert, and an allocation that
   * lives long enough to be promoted). Idle expired entries are still swept on inserts. Only an
   * entry of another algorithm (its rule changed on a policy reload) is dropped.
   */
  #lookup(spec: CounterSpec): Entry | undefined {
    const entry = this.#entries.get(spec.key);
    if (entry === undefined || entry.algorithm.name === spec.algorithm) return entry;
    // A read (cost 0) changes nothing, this included.
    if (spec.cost > 0) this.#drop(entry);
    return undefined;
  }

  #drop(entry: Entry): void {
    const bytes = bytesOf(entry);
    if (entry.hot) {
      this.#protected.remove(entry);
      this.#protectedBytes -= bytes;
    } else this.#probation.remove(entry);
    this.#entries.delete(entry.key);
    this.#bytes -= bytes;
    entry.owner = undefined;
  }

  #touch(entry: Entry): void {
    if (entry.hot) {
      entry.referenced = true;
      return;
    }
    // Second request: promote.
    entry.hot = true;
    this.#probation.remove(entry);
    this.#protected.append(entry);
    this.#protectedBytes += bytesOf(entry);
    // Probation keeps a share of the bytes too, or keys too large for it could never be counted.
    if (this.#protected.size > this.#protectedCap) this.#demote();
    while (this.#protectedBytes > this.#protectedByteCap && this.#protected.size > 0)
      this.#demote();
  }

  #insert(entry: Entry, now: number): void {
    this.#sweep(this.#probation, now);
    this.#sweep(this.#protected, now);
    this.#entries.set(entry.key, entry);
    this.#probation.append(entry);
    this.#bytes += bytesOf(entry);
    while (this.#entries.size > this.maxKeys || this.#bytes > this.maxBytes) this.#evictOne(now);
  }

  /**
   * Drops a few expired entries from the old end of a segment, once a request counted late can
   * no longer need them (`LATE_GRACE_MS`): `now` is another request's time.
   */
  #sweep(segment: EntryList<Entry>, now: number): void {
    for (let checked = 0; checked < SWEEP_PER_INSERT; checked++) {
      const oldest = segment.oldest;
      if (oldest === undefined || oldest.expiresAt + LATE_GRACE_MS > now) return;
      this.#drop(oldest);
    }
  }

  /** Moves the protected entry the clock hand stops at into probation. */
  #demote(): void {
    for (let scanned = 0; ; scanned++) {
      const entry = this.#protected.oldest;
      if (entry === undefined) return;
      this.#protected.remove(entry);
      if (entry.referenced && scanned < SECOND_CHANCE_SCAN) {
        entry.referenced = false;
        this.#protected.append(entry);
        continue;
      }
      entry.referenced = false;
      entry.hot = false;
      this.#protectedBytes -= bytesOf(entry);
      this.#probation.append(entry);
      return;
    }
  }

  #evictOne(now: number): void {
    const oldest = (this.#probation.size > 0 ? this.#probation : this.#protected).oldest;
    if (oldest === undefined) return;
    if (oldest.expiresAt > now) this.evictions++;
    this.#drop(oldest);
  }
}

/** What an entry takes, by estimate: V8 holds a key in one or two bytes a character. */
function bytesOf(entry: Entry): number {
  return ENTRY_BYTES + 2 * entry.key.length;
}

/** A bounded in-process store. Exact within one process; use Redis to share counts. */
export function memoryStore(options?: MemoryStoreOptions): MemoryStore {
  return new MemoryStore(options);
}
