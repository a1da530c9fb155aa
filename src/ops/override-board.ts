/**
 * The overrides a server holds, as its dashboard and metrics show them: read from the limiter's
 * snapshot (core/override-watch.ts), never from the store, so a dashboard open on every
 * instance costs the store nothing. An override past its `until` is left out at the time of
 * the look, as the counting step skips it, even before the next refresh drops it.
 *
 * Bounded: the snapshot holds at most 10,000 overrides; the board keeps one sorted copy of it
 * (made again only when the snapshot changes) and the dashboard is sent the first `SHOWN`.
 */
import type { Override } from "../core/overrides.js";

/** What the dashboard, `/events` and `/api/snapshot` carry of the overrides held. */
export interface OverrideFigures {
  /** Whether this server reads overrides from its store at all. */
  readonly kept: boolean;
  /** The overrides in force now: held and not expired. */
  readonly active: number;
  /** The first of them, soonest to expire first, those with no expiry last (newest first). */
  readonly shown: readonly Override[];
}

/** How many overrides a snapshot carries at most (the rest are counted in `active`). */
export const SHOWN_OVERRIDES = 100;

export class OverrideBoard {
  readonly #read: () => readonly Override[] | undefined;
  #held: readonly Override[] | undefined;
  #sorted: readonly Override[] = [];

  /** `read`: the overrides held now (the limiter's `heldOverrides`). */
  constructor(read: () => readonly Override[] | undefined) {
    this.#read = read;
  }

  figures(now: number): OverrideFigures {
    const held = this.#read();
    if (held === undefined) return { kept: false, active: 0, shown: [] };
    const sorted = this.#sortedOf(held);
    const first = firstInForce(sorted, now);
    return {
      kept: true,
      active: sorted.length - first,
      shown: sorted.slice(first, first + SHOWN_OVERRIDES),
    };
  }

  /** The overrides in force now (the `edgelimit_overrides_active` gauge); 0 when none are read. */
  active(now: number): number {
    const held = this.#read();
    if (held === undefined) return 0;
    const sorted = this.#sortedOf(held);
    return sorted.length - firstInForce(sorted, now);
  }

  #sortedOf(held: readonly Override[]): readonly Override[] {
    if (held !== this.#held) {
      this.#held = held;
      this.#sorted = [...held].sort(
        (a, b) => (a.until ?? Infinity) - (b.until ?? Infinity) || b.setAt - a.setAt,
      );
    }
    return this.#sorted;
  }
}

/** The index of the first override not expired at `now`: sorted by expiry, the expired lead. */
function firstInForce(sorted: readonly Override[], now: number): number {
  let low = 0;
  let high = sorted.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    const until = (sorted[middle] as Override).until;
    if (until !== undefined && until <= now) low = middle + 1;
    else high = middle;
  }
  return low;
}
