/**
 * Why legitimate decisions waited. A decision waited when it took longer than its region's round
 * trip to its own store (the nearest replica; the Redis primary) plus `WAIT_MARGIN_MS`: it
 * waited for something farther away, which for hybrid counting is a reservation in the lease
 * region. Each wait is put down to what would have been needed to answer it without that round
 * trip, from what the same process and the same region saw before it, per subject and rule,
 * in the report window and the one before:
 *
 * - `heldRanOut`: the process had seen every rule of the request's subject in this window (it
 *   held units and found them spent): a larger or earlier top-up;
 * - `seenHereWindowBefore`: the process had seen them this window or the one before: units
 *   reserved for the next window before it starts;
 * - `seenInRegion`: another process of the region had: a holder shared by the region;
 * - `newInRegion`: the region had not seen one of them: only an answer without a reservation.
 *
 * The categories say what the simulator saw, not what a design would measure: they bound what
 * each idea could remove from the waits.
 */

/** A wait is at least this much longer than the round trip to the region's own store. */
export const WAIT_MARGIN_MS = 10;

export interface RegionWaits {
  /** Legitimate decisions in the region. */
  requests: number;
  waited: number;
  heldRanOut: number;
  seenHereWindowBefore: number;
  seenInRegion: number;
  newInRegion: number;
  /**
   * The subjects that waited most here (at most `TOP_SUBJECTS`, most first): whether a few
   * subjects or many make the waits.
   */
  topSubjects: { subject: string; waited: number }[];
}

/** How many subjects `RegionWaits.topSubjects` names. */
const TOP_SUBJECTS = 3;

/** A region's counts as they grow, and its waits by subject (only subjects that waited). */
type RegionTally = Omit<RegionWaits, "topSubjects"> & { readonly subjects: Map<string, number> };

export class WaitCauses {
  readonly #windowMs: number;
  readonly #ownStoreMs: (region: string) => number;
  /** The last report window each key was seen in, by process and key, and by region and key. */
  readonly #atProcess = new Map<string, number>();
  readonly #inRegion = new Map<string, number>();
  readonly #byRegion = new Map<string, RegionTally>();

  constructor(windowMs: number, ownStoreMs: (region: string) => number) {
    this.#windowMs = windowMs;
    this.#ownStoreMs = ownStoreMs;
  }

  /** A legitimate decision: its region and process, its subject and rules, when and how long. */
  legitimate(
    region: string,
    process: number,
    subject: string,
    keys: readonly string[],
    epochAt: number,
    decisionMs: number,
  ): void {
    let waits = this.#byRegion.get(region);
    if (waits === undefined) {
      waits = {
        requests: 0,
        waited: 0,
        heldRanOut: 0,
        seenHereWindowBefore: 0,
        seenInRegion: 0,
        newInRegion: 0,
        subjects: new Map(),
      };
      this.#byRegion.set(region, waits);
    }
    waits.requests++;
    const window = Math.floor(epochAt / this.#windowMs);
    const here = keys.map((key) => this.#atProcess.get(`${process}\u0000${key}`));
    const there = keys.map((key) => this.#inRegion.get(`${region}\u0000${key}`));
    if (decisionMs > this.#ownStoreMs(region) + WAIT_MARGIN_MS) {
      waits.waited++;
      waits.subjects.set(subject, (waits.subjects.get(subject) ?? 0) + 1);
      if (here.every((last) => last === window)) waits.heldRanOut++;
      else if (here.every((last) => last !== undefined && last >= window - 1))
        waits.seenHereWindowBefore++;
      else if (there.every((last) => last !== undefined && last >= window - 1))
        waits.seenInRegion++;
      else waits.newInRegion++;
    }
    for (const key of keys) {
      this.#atProcess.set(`${process}\u0000${key}`, window);
      this.#inRegion.set(`${region}\u0000${key}`, window);
    }
  }

  /** Per region, sorted by name. */
  byRegion(): Record<string, RegionWaits> {
    const out: Record<string, RegionWaits> = {};
    const regions = [...this.#byRegion].sort(([a], [b]) => (a < b ? -1 : 1));
    for (const [name, { subjects, ...counts }] of regions) {
      const topSubjects = [...subjects]
        .map(([subject, waited]) => ({ subject, waited }))
        .sort((a, b) => b.waited - a.waited || (a.subject < b.subject ? -1 : 1))
        .slice(0, TOP_SUBJECTS);
      out[name] = { ...counts, topSubjects };
    }
    return out;
  }
}
