/**
 * A reset's fence (see hybrid-counting.ts, "Resets reach every process"): a counter beside a
 * hybrid counter that a reset raises and every reservation reads. While it is up, processes hold
 * nothing; the reset waits until every lease granted before it has run out, then resets, so no
 * unit counted before a reset is ever spent after it.
 */
import type { Scheduler } from "../deadline.js";
import type { Reservation } from "../reservation.js";
import type { CounterSpec, Store } from "../types.js";

/**
 * A reset's fence stands this much longer than the reset waits (a lease): until the store has
 * forgotten the count, no process may hold units, and the reset's own call to the store takes a
 * round trip after the wait.
 */
export const FENCE_MARGIN_MS = 1_000;

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
 * The fence reads that go with reservations `asked` (for `counters[missing[j]]`): where leases
 * apply, one for each reservation that may hold units after its request, one that asks for more
 * than the request's cost or one behind a fence (it must learn when the fence is down). A
 * request that asks only for its own cost spends it at once, so none of it can outlive a reset:
 * its call is then exact counting's, which the Redis store sends as a blind `INCRBY`, not the
 * script (bench/rls.bench.ts, part 3: a subject's first request in a window).
 */
export function fencesFor(
  asked: readonly CounterSpec[],
  missing: readonly number[],
  counters: readonly CounterSpec[],
  reservations: readonly Reservation[],
  leaseMs: number,
): { fenced: boolean[]; fences: CounterSpec[] } {
  const fenced = asked.map(
    (counter, j) =>
      leaseMs > 0 &&
      (counter.cost > (counters[missing[j] as number] as CounterSpec).cost ||
        (reservations[j] as Reservation).fenced),
  );
  const fences = asked.filter((_, j) => fenced[j]).map((counter) => fenceRead(counter, leaseMs));
  return { fenced, fences };
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

/** Subjects this process reset, kept at most this many (resets are an operator's, and rare). */
const MAX_RECENT_RESETS = 10_000;

/**
 * The counters this process reset, until their fences are down: a reservation it makes for one
 * of them starts behind the fence (it reads the fence, and holds nothing until the fence is
 * down), as one that had read it would. A request that asks only for its own cost reads no
 * fence (`fencesFor`), so without this the next request, asking for more, would learn of the
 * fence only after the store counted units that it then may not hold.
 */
export class RecentResets {
  readonly #until = new Map<string, number>();

  add(counters: readonly CounterSpec[], until: number): void {
    for (const counter of counters) {
      if (counter.counting !== "hybrid") continue;
      this.#until.delete(counter.key);
      this.#until.set(counter.key, until);
      if (this.#until.size > MAX_RECENT_RESETS) {
        const oldest = this.#until.keys().next().value as string;
        this.#until.delete(oldest);
      }
    }
  }

  /** Whether `key` was reset here and its fence may still be up at `now`. */
  fenced(key: string, now: number): boolean {
    if (this.#until.size === 0) return false;
    const until = this.#until.get(key);
    if (until === undefined) return false;
    if (now < until) return true;
    this.#until.delete(key);
    return false;
  }
}
