import { ALGORITHMS } from "../../src/core/algorithms/index.js";
import type { AlgorithmName, CounterSpec, CounterState, WindowSpec } from "../../src/core/types.js";
import { LATE_GRACE_MS, windowIndexAt, windowSpanOf } from "../../src/core/windows.js";

/** A counter of `subject` in namespace `api`, as the policy would make it for rule `scope`. */
export function counter(
  subject: string,
  scope: string,
  algorithm: AlgorithmName,
  limit: number,
  window: WindowSpec,
  cost = 1,
  mode: "enforce" | "observe" = "enforce",
): CounterSpec {
  return {
    key: `${subject}|api|${scope}`,
    subject,
    algorithm,
    limit,
    window,
    cost,
    mode,
    ruleId: `anonymous.${scope}`,
    namespace: "api",
  };
}

/** States as compared: -0 and 0 are the same count, and Lua replies never carry the sign of zero. */
export function plain(states: CounterState[]): CounterState[] {
  return states.map((state) => ({
    allowed: state.allowed,
    count: state.count + 0,
    remaining: state.remaining + 0,
    resetAt: state.resetAt + 0,
    retryAfterMs: state.retryAfterMs + 0,
  }));
}

/**
 * What the Redis Lua is compared with: the TypeScript algorithms (src/core/algorithms) applied
 * with the three phases of the Store contract (src/core/types.ts), a state of another algorithm
 * counting as none, and each state kept until it expires (`Algorithm.expiresAt`, and
 * `LATE_GRACE_MS` after) at the time it is counted at, as Redis keeps a key until its `PX` runs
 * out.
 *
 * The memory store differs in one way only: it keeps an expired state until a sweep drops it.
 * No request can tell the two apart except one stamped before the expired state's time (a token
 * bucket moved to a request's `now`, read by a request stamped earlier).
 */
export class AlgorithmReference {
  readonly #states = new Map<string, { algorithm: AlgorithmName; state: unknown }>();
  /**
   * Fixed windows as this version counts them (`w` specs): each window in a state of its own,
   * which no other algorithm's state replaces and no newer window rewinds, so a request stamped
   * late counts in its own window. False: as earlier versions counted them, in the counter's
   * state (`f` specs).
   */
  keyedFixedWindows = true;

  /**
   * Drops the window length from every windowed state, as a store that recorded none (states
   * written before `WindowedState.span` existed) would hold them.
   */
  forgetSpans(): void {
    for (const { state } of this.#states.values()) {
      if (typeof state === "object" && state !== null && "span" in state) {
        (state as { span: number | undefined }).span = undefined;
      }
    }
  }

  apply(counters: readonly CounterSpec[], now: number): CounterState[] {
    const keys = counters.map((counter) =>
      this.keyedFixedWindows && counter.algorithm === "fixed-window"
        ? `${counter.key}|w${windowSpanOf(counter.window)}:${windowIndexAt(counter.window, now)}`
        : counter.key,
    );
    const found = counters.map((counter, index) => {
      const entry = this.#states.get(keys[index] as string);
      if (entry === undefined) return undefined;
      if (entry.algorithm === counter.algorithm) return entry.state;
      // A read (cost 0) writes nothing, not even this.
      if (counter.cost > 0) this.#states.delete(keys[index] as string);
      return undefined;
    });
    const allowed = counters.map((counter, index) =>
      ALGORITHMS[counter.algorithm].allows(found[index], now, counter),
    );
    const admitted = counters.every(
      (counter, index) => allowed[index] || counter.mode === "observe",
    );
    return counters.map((counter, index) => {
      const algorithm = ALGORITHMS[counter.algorithm];
      const ok = allowed[index] as boolean;
      let state = found[index];
      // A refused request leaves a token bucket as it was (the Lua writes nothing for it).
      const bucketRefused = counter.algorithm === "token-bucket" && !ok;
      // A cost of 0 reads: the Lua writes nothing for it (a peek, rls's `hits_addend: 0`).
      const read = counter.cost === 0;
      if (!read && !bucketRefused && (admitted || !ok || counter.mode === "observe")) {
        state = algorithm.count(state, now, counter, ok);
        if (algorithm.expiresAt(state, now, counter) + LATE_GRACE_MS > now) {
          this.#states.set(keys[index] as string, { algorithm: counter.algorithm, state });
        } else {
          this.#states.delete(keys[index] as string);
        }
      }
      return algorithm.describe(state, now, counter, ok);
    });
  }
}
