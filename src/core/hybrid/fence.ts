/**
 * A reset's fence (see hybrid-counting.ts, "Resets reach every process"): a counter beside a
 * hybrid counter that a reset raises and every reservation reads. While it is up, processes hold
 * nothing; the reset waits until every lease granted before it has run out, then resets, so no
 * unit counted before a reset is ever spent after it.
 */
import type { Scheduler } from "../deadline.js";
import type { CounterSpec, Store } from "../types.js";

/**
 * A reset's fence stands this much longer than the reset waits (a lease): until the store has
 * forgotten the count, no process may hold units, and the reset's own call to the store takes a
 * round trip after the wait.
 */
const FENCE_MARGIN_MS = 1_000;

/**
 * The fence of a hybrid counter: a sliding-window counter of `fenceMs` beside it (a fourth key
 * part, so it never meets a counter of a rule). A reset counts 1 on it; a reservation reads it
 * (cost 0) and finds it above 0 until at least `fenceMs` after the reset, which is as long as
 * the reset waits.
 */
function fenceOf(counter: CounterSpec, fenceMs: number, cost: number): CounterSpec {
  return {
    key: `${counter.key}|reset`,
    subject: counter.subject,
    algorithm: "sliding-window",
    limit: 1,
    window: { ms: fenceMs },
    cost,
    mode: "observe",
    ruleId: counter.ruleId,
    namespace: counter.namespace,
    counting: "exact",
  };
}

/** The read (cost 0) of `counter`'s fence that goes with each reservation where leases apply. */
export function fenceRead(counter: CounterSpec, leaseMs: number): CounterSpec {
  return fenceOf(counter, leaseMs + FENCE_MARGIN_MS, 0);
}

/**
 * Raises the fence of every hybrid counter in `counters`, then waits until every lease granted
 * before it has run out (`leaseMs`). The caller resets the store's counts after.
 */
export async function raiseFences(
  inner: Store,
  counters: readonly CounterSpec[],
  leaseMs: number,
  now: number,
  scheduler: Scheduler,
): Promise<void> {
  const hybrid = counters.filter((counter) => counter.counting === "hybrid");
  if (hybrid.length === 0) return;
  await inner.apply(
    hybrid.map((counter) => fenceOf(counter, leaseMs + FENCE_MARGIN_MS, 1)),
    now,
  );
  // Every lease granted before the fence went up was sent before it: run out by now.
  await new Promise<void>((resolve) => {
    scheduler.setTimeout(resolve, leaseMs);
  });
}
