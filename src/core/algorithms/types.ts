import type { CounterState, WindowSpec } from "../types.js";

/** What an algorithm needs to know about a rule. */
export interface CounterRule {
  readonly limit: number;
  readonly window: WindowSpec;
  readonly cost: number;
}

/**
 * An algorithm is a set of pure functions of (state, now, rule). The clock is always passed in:
 * nothing here reads `Date.now()`, so tests and the simulator drive time.
 *
 * A store applies a request in three steps: `allows` on every counter, then `count` on the
 * counters that must count it, then `describe` for the answer (`applyCounters`, apply.ts).
 */
export interface Algorithm<S> {
  readonly name: string;
  /** Would a request of `rule.cost` pass now? */
  allows(state: S | undefined, now: number, rule: CounterRule): boolean;
  /** The state after counting the request. `allowed` is what `allows` said. */
  count(state: S | undefined, now: number, rule: CounterRule, allowed: boolean): S;
  /** The public view of a state, after the request was (or was not) counted. */
  describe(state: S | undefined, now: number, rule: CounterRule, allowed: boolean): CounterState;
  /** Epoch ms after which the state carries no information and may be dropped. */
  expiresAt(state: S, now: number, rule: CounterRule): number;
}
