import type { Action } from "../core/types.js";

/** Decisions counted in one second. */
export interface SecondSample {
  /** Epoch seconds. */
  readonly at: number;
  readonly allow: number;
  readonly block: number;
  readonly challenge: number;
  readonly unavailable: number;
}

interface MutableSample {
  at: number;
  allow: number;
  block: number;
  challenge: number;
  unavailable: number;
}

/**
 * Per-second decision counts for the dashboard chart, in a ring of `seconds` slots: memory is
 * fixed whatever the traffic, and a slot is reused once its second has scrolled out.
 */
export class RateSeries {
  readonly seconds: number;
  readonly #ring: MutableSample[];

  constructor(seconds = 120) {
    this.seconds = seconds;
    this.#ring = Array.from({ length: seconds }, () => ({
      at: -1,
      allow: 0,
      block: 0,
      challenge: 0,
      unavailable: 0,
    }));
  }

  record(action: Action, nowMs: number): void {
    const at = Math.floor(nowMs / 1000);
    const slot = this.#ring[at % this.seconds] as MutableSample;
    if (slot.at !== at) {
      slot.at = at;
      slot.allow = 0;
      slot.block = 0;
      slot.challenge = 0;
      slot.unavailable = 0;
    }
    slot[action]++;
  }

  /** The last `seconds` whole seconds before `nowMs`, oldest first, zeros where quiet. */
  samples(nowMs: number): SecondSample[] {
    const current = Math.floor(nowMs / 1000);
    const out: SecondSample[] = [];
    for (let at = current - this.seconds + 1; at <= current; at++) {
      const slot = this.#ring[at % this.seconds] as MutableSample;
      out.push(
        slot.at === at ? { ...slot } : { at, allow: 0, block: 0, challenge: 0, unavailable: 0 },
      );
    }
    return out;
  }
}
