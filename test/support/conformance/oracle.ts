/** Checks each verdict of a history against the limits as it comes (see histories.ts). */
import { expect } from "vitest";
import type { CounterSpec } from "../../../src/core/types.js";
import { windowIndexAt } from "../../../src/core/windows.js";
import type { Verdict } from "../../../src/http/respond.js";
import type { ResolvedPolicy } from "../../../src/policy/types.js";
import { countedWindow } from "./contract.js";

/** What the oracle saw: enough to say that it checked something. */
export interface Tally {
  admitted: number;
  refused: number;
}

/**
 * Checks each verdict against the limits as it comes (see histories.ts's header). On the store's
 * clock (`storeClock`), a verdict's time is the store's when it was admitted, and the units
 * admitted in each window of the store's clock never exceed the limit.
 */
export class Oracle {
  readonly #exact: boolean;
  readonly #storeClock: boolean;
  /** Units admitted per policy version, rule, subject, window and reset epoch. */
  readonly #admitted = new Map<string, number>();
  /** Units admitted per rule shape, subject, window and reset epoch (what a count must hold). */
  readonly #counted = new Map<string, number>();
  /** Token buckets: the stamps and costs admitted per version, rule, subject and epoch. */
  readonly #buckets = new Map<string, { stamp: number; cost: number }[]>();
  readonly #epochs = new Map<string, number>();
  /**
   * Per rule: how many reloads changed its algorithm or window. Such a reload starts the rule's
   * counters afresh (a counter remembers the window it was counted under), even one that changes
   * it back: what a count must hold starts again too.
   */
  readonly #shapes = new Map<string, number>();

  constructor(counting: "exact" | "hybrid", storeClock: boolean) {
    this.#exact = counting === "exact";
    this.#storeClock = storeClock;
  }

  reload(before: ResolvedPolicy, after: ResolvedPolicy): void {
    for (const rule of after.rules) {
      const old = before.rules.find((candidate) => candidate.id === rule.id);
      const same =
        old !== undefined &&
        old.algorithm === rule.algorithm &&
        JSON.stringify(old.window) === JSON.stringify(rule.window);
      if (!same) this.#shapes.set(rule.id, (this.#shapes.get(rule.id) ?? 0) + 1);
    }
  }

  reset(subject: string): void {
    this.#epochs.set(subject, (this.#epochs.get(subject) ?? 0) + 1);
  }

  record(
    verdict: Verdict,
    policy: ResolvedPolicy,
    version: number,
    stamp: number,
    cost: number,
    tally: Tally,
    inOrder: boolean,
  ): void {
    if (verdict.action !== "allow") {
      if (verdict.action === "block") tally.refused++;
      return;
    }
    expect(verdict.reason).toBe("within-limit");
    tally.admitted++;
    const epoch = this.#epochs.get(verdict.subject) ?? 0;
    for (const outcome of verdict.outcomes) {
      const rule = policy.rules.find((candidate) => candidate.id === outcome.ruleId);
      if (rule === undefined) throw new Error(`no rule ${outcome.ruleId}`);
      const counter = { algorithm: rule.algorithm, window: rule.window } as CounterSpec;
      const group = `${version}|${rule.id}|${verdict.subject}|${epoch}`;
      if (rule.algorithm === "token-bucket") {
        this.#checkBucket(group, stamp, cost, rule.limit, windowLengthOf(rule.window));
        continue;
      }
      const window = countedWindow(counter, outcome.state);
      // Never counted in a window before the request's own.
      if (!this.#storeClock)
        expect(window).toBeGreaterThanOrEqual(windowIndexAt(rule.window, stamp));
      // On the store's clock, the window it was admitted in is the store's at that time.
      const admittedIn = this.#storeClock ? windowIndexAt(rule.window, stamp) : window;
      const key = `${group}|${admittedIn}`;
      const admitted = (this.#admitted.get(key) ?? 0) + cost;
      this.#admitted.set(key, admitted);
      expect(admitted, `units admitted in window ${admittedIn} of ${rule.id}`).toBeLessThanOrEqual(
        rule.limit,
      );
      if (this.#storeClock) {
        // ...and the one its units were counted in: none is spent after the store's window ended.
        expect(window, `the window ${rule.id}'s units were counted in`).toBe(admittedIn);
      }
      if (this.#exact) {
        // Concurrent answers settle in any order: a count can only be held to those before it.
        const shape = `${rule.id}|${this.#shapes.get(rule.id) ?? 0}|${verdict.subject}|${epoch}|${window}`;
        const counted = (this.#counted.get(shape) ?? 0) + cost;
        this.#counted.set(shape, counted);
        if (inOrder) {
          expect(
            outcome.state.count,
            `the count of window ${window} of ${rule.id}`,
          ).toBeGreaterThanOrEqual(counted);
        }
      }
    }
  }

  #checkBucket(group: string, stamp: number, cost: number, limit: number, windowMs: number): void {
    const admitted = this.#buckets.get(group) ?? [];
    admitted.push({ stamp, cost });
    this.#buckets.set(group, admitted);
    // Any span [a, b] of stamps: at most limit * (b - a + window) / window units.
    for (const start of admitted) {
      let units = 0;
      for (const other of admitted) {
        if (other.stamp >= start.stamp && other.stamp <= stamp) units += other.cost;
      }
      if (start.stamp > stamp) continue;
      const allowed = (limit * (stamp - start.stamp + windowMs)) / windowMs + 1e-6;
      expect(units, "units a token bucket admitted over a span").toBeLessThanOrEqual(allowed);
    }
  }
}

function windowLengthOf(window: { ms: number } | { months: number }): number {
  if (!("ms" in window)) throw new Error("histories use windows in ms");
  return window.ms;
}
