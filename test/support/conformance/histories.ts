/**
 * The property that makes exactness a proof rather than a claim: random histories against a
 * store, through the real limiter, never admit more than a limit.
 *
 * A history is a fleet of two or three limiters ("processes") on one store, each with a clock
 * that is off by up to ±50 ms, sending requests that are counted up to 100 ms late, with costs
 * from 1 to 5, while the fleet reloads its policy (another limit, window or algorithm), resets
 * subjects and sees its store fail (before a call reaches it, or after it counted but before the
 * answer came back). In half of them the store counts on a clock of its own (store-clock.ts),
 * which the processes' clocks are up to 250 ms behind or 50 ms ahead of. The oracle reads the
 * verdicts:
 *
 * - windowed rules: the units admitted in each window (the window a store counted them in, as
 *   its answer says, never one before the request's own; on the store's clock, the window of
 *   the store's clock when they were admitted, which is the one they were counted in) never
 *   exceed the limit of the policy in force, between two resets of the subject;
 * - token buckets: over any span of the stamps requests were counted at, the units admitted
 *   never exceed what a bucket of the limit refills over that span, plus one full bucket;
 * - exact counting loses nothing: a store's answer never shows a count below what it admitted
 *   in that window.
 *
 * Histories are bounded and seeded; the seed is printed, and `EDGELIMIT_PROPERTY_SEED` runs one
 * again (`EDGELIMIT_PROPERTY_RUNS` runs more). A shrunk counterexample goes into
 * `FIXED_HISTORIES` (history.ts).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { hybridCounting } from "../../../src/core/hybrid-counting.js";
import type {
  CounterSpec,
  CounterState,
  Store,
  StoreCallProgress,
} from "../../../src/core/types.js";
import { createLimiter, type Limiter } from "../../../src/limiter.js";
import { definePolicy } from "../../../src/policy/load.js";
import type { ResolvedPolicy } from "../../../src/policy/types.js";
import { virtualStart } from "./contract.js";
import {
  type Algorithm,
  FIXED_HISTORIES,
  type History,
  type RuleShape,
  type Step,
} from "./history.js";
import { Oracle, type Tally } from "./oracle.js";
import { HistoryClock, OwnClockStore } from "./store-clock.js";
import type { Target } from "./targets.js";

const algorithms = (hybrid: boolean): fc.Arbitrary<Algorithm> =>
  hybrid
    ? fc.constantFrom("fixed-window", "sliding-window")
    : fc.constantFrom("fixed-window", "sliding-window", "token-bucket");

function ruleShape(hybrid: boolean): fc.Arbitrary<RuleShape> {
  return fc.record({
    algorithm: algorithms(hybrid),
    limit: fc.integer({ min: 3, max: 12 }),
    windowSeconds: fc.integer({ min: 1, max: 3 }),
  });
}

export function historyArbitrary(options: {
  readonly hybrid: boolean;
  readonly canReset: boolean;
  readonly maxSteps: number;
}): fc.Arbitrary<History> {
  return fc.integer({ min: 2, max: 3 }).chain((limiters) => {
    const limiter = fc.integer({ min: 0, max: limiters - 1 });
    const step: fc.Arbitrary<Step> = fc.oneof(
      {
        weight: 20,
        arbitrary: fc.record({
          kind: fc.constant("request" as const),
          limiter,
          subject: fc.integer({ min: 0, max: 1 }),
          path: fc.integer({ min: 0, max: 1 }),
          cost: fc.oneof({ weight: 3, arbitrary: fc.constant(1) }, fc.integer({ min: 1, max: 5 })),
          lateMs: fc.oneof(
            { weight: 3, arbitrary: fc.constant(0) },
            fc.integer({ min: 0, max: 100 }),
          ),
          advanceMs: fc.oneof(
            { weight: 4, arbitrary: fc.integer({ min: 0, max: 40 }) },
            fc.integer({ min: 0, max: 1500 }),
          ),
        }),
      },
      {
        weight: 2,
        arbitrary: fc.record({
          kind: fc.constant("burst" as const),
          subject: fc.integer({ min: 0, max: 1 }),
          path: fc.integer({ min: 0, max: 1 }),
          perLimiter: fc.integer({ min: 2, max: 6 }),
          advanceMs: fc.integer({ min: 0, max: 400 }),
        }),
      },
      {
        weight: 1,
        arbitrary: fc.record({
          kind: fc.constant("reload" as const),
          global: ruleShape(options.hybrid),
          path: ruleShape(options.hybrid),
        }),
      },
      {
        weight: options.canReset ? 1 : 0,
        arbitrary: fc.record({
          kind: fc.constant("reset" as const),
          limiter,
          subject: fc.integer({ min: 0, max: 1 }),
        }),
      },
      {
        weight: 1,
        arbitrary: fc.record({ kind: fc.constant("fail" as const), limiter, after: fc.boolean() }),
      },
    );
    // On the store's clock, processes are up to 250 ms behind it (or 50 ms ahead).
    return fc.boolean().chain((storeClock) =>
      fc.record({
        storeClock: fc.constant(storeClock),
        offsets: fc.array(fc.integer({ min: storeClock ? -250 : -50, max: 50 }), {
          minLength: limiters,
          maxLength: limiters,
        }),
        global: ruleShape(options.hybrid),
        path: ruleShape(options.hybrid),
        steps: fc.array(step, { minLength: 5, maxLength: options.maxSteps }),
      }),
    );
  });
}

/**
 * A store that fails its next call on demand: before it reaches the store, or after. Its region
 * holder and allowances, where it has them, are the inner store's (a store on a clock of its own,
 * `OwnClockStore`, has none: a holder counts at the caller's stamp).
 */
class FaultyStore implements Store {
  readonly name: string;
  readonly traits: Store["traits"];
  readonly #inner: Store;
  readonly holder: Store["holder"];
  readonly allowances: Store["allowances"];
  failNext: "before" | "after" | undefined;

  constructor(inner: Store) {
    this.#inner = inner;
    this.name = inner.name;
    // A store that counts hybrid rules itself stays so (its hybrid layer is not doubled).
    this.traits = inner.traits?.hybrid === true ? { hybrid: true } : undefined;
    this.holder = inner.holder;
    this.allowances = inner.allowances;
    if (inner.reset !== undefined)
      this.reset = (counters) => inner.reset?.(counters) as Promise<void>;
  }

  reset?: (counters: readonly CounterSpec[]) => Promise<void>;

  async apply(
    counters: readonly CounterSpec[],
    now: number,
    progress?: StoreCallProgress,
  ): Promise<CounterState[]> {
    const fail = this.failNext;
    this.failNext = undefined;
    if (fail === "before") throw new Error("injected: the call never reached the store");
    const states = await this.#inner.apply(counters, now, progress);
    if (fail === "after") throw new Error("injected: the store counted, the answer was lost");
    return states;
  }
}

function policyOf(
  global: RuleShape,
  path: RuleShape,
  counting: "exact" | "hybrid",
): ResolvedPolicy {
  const rule = (shape: RuleShape) => ({
    limit: shape.limit,
    window: `${shape.windowSeconds}s` as const,
    algorithm: shape.algorithm,
    counting,
  });
  return definePolicy({
    budget: "10s",
    defaults: { failMode: "closed" },
    tiers: { anonymous: { global: rule(global), paths: { "/x": rule(path) } } },
  });
}

/** Runs one history against fresh stores of the target and checks every verdict. */
export async function runHistory(
  target: Target,
  history: History,
  counting: "exact" | "hybrid",
  tally: Tally,
): Promise<void> {
  const clock = new HistoryClock(virtualStart());
  const storeClock = history.storeClock === true;
  const stores = (await target.stores(history.offsets.length)).map(
    (store) => new FaultyStore(storeClock ? new OwnClockStore(store, clock) : store),
  );
  let policy = policyOf(history.global, history.path, counting);
  let version = 0;
  const stamps = history.offsets.map(() => clock.time);
  // The time each admission is held to: the store's clock when it has one, else the stamp.
  const heldAt = (stamp: number) => (storeClock ? clock.time : stamp);
  const limiters: Limiter[] = stores.map((store, i) =>
    createLimiter({
      policy,
      // Hybrid counting in front of each process's store, as a deployment builds it.
      store:
        counting === "hybrid"
          ? hybridCounting(store, {
              // On the history's time a reset waits for nothing real: leases may be long enough
              // to hold units to their window's end (short ones would hide it).
              leaseMs: storeClock ? 1000 : 20,
              clock: () => stamps[i] as number,
              scheduler: storeClock ? clock.scheduler() : undefined,
            })
          : store,
      clock: () => stamps[i] as number,
      onStoreError: () => {},
    }),
  );
  const oracle = new Oracle(counting, storeClock);
  for (const step of history.steps) {
    if (step.kind === "reload") {
      const next = policyOf(step.global, step.path, counting);
      oracle.reload(policy, next);
      policy = next;
      version++;
      for (const limiter of limiters) limiter.reload(policy);
      continue;
    }
    if (step.kind === "fail") {
      (stores[step.limiter] as FaultyStore).failNext = step.after ? "after" : "before";
      continue;
    }
    if (step.kind === "burst") {
      clock.time += step.advanceMs;
      const ip = `198.51.100.${step.subject + 1}`;
      const sent = limiters.flatMap((limiter, i) => {
        const stamp = clock.time + (history.offsets[i] as number);
        stamps[i] = stamp;
        return Array.from({ length: step.perLimiter }, () =>
          limiter
            .check({ ip, path: step.path === 1 ? "/x" : "/" })
            .then((verdict) => ({ verdict, stamp })),
        );
      });
      // Settled in any order: the limits hold, but no one answer can show the others' counts.
      for (const { verdict, stamp } of await Promise.all(sent)) {
        oracle.record(verdict, policy, version, heldAt(stamp), 1, tally, false);
      }
      continue;
    }
    const limiter = limiters[step.limiter] as Limiter;
    const offset = history.offsets[step.limiter] as number;
    const ip = `198.51.100.${step.subject + 1}`;
    if (step.kind === "reset") {
      stamps[step.limiter] = clock.time + offset;
      try {
        await limiter.reset({ ip, path: "/x" });
      } catch {
        // The store failed the reset (an injected fault): nothing was forgotten.
        continue;
      }
      oracle.reset(`ip:${ip}`);
      continue;
    }
    clock.time += step.advanceMs;
    const stamp = clock.time + offset - step.lateMs;
    stamps[step.limiter] = stamp;
    const verdict = await limiter.check({
      ip,
      path: step.path === 1 ? "/x" : "/",
      cost: step.cost,
    });
    oracle.record(verdict, policy, version, heldAt(stamp), step.cost, tally, true);
  }
}

/** The property over random histories, and the fixed counterexamples, for one target. */
export function describeHistories(
  current: () => Target,
  options: {
    readonly runs: number;
    readonly maxSteps: number;
    readonly countings?: readonly ("exact" | "hybrid")[];
  },
): void {
  for (const counting of options.countings ?? (["exact", "hybrid"] as const)) {
    describe(`random histories, ${counting} counting`, () => {
      it("never admit more than a limit, and lose nothing admitted", async () => {
        const target = current();
        const runs = Number(process.env.EDGELIMIT_PROPERTY_RUNS ?? options.runs);
        const seed = Number(process.env.EDGELIMIT_PROPERTY_SEED ?? Date.now() % 2_147_483_647);
        console.info(
          `${target.name} ${counting}: fast-check seed ${seed} (EDGELIMIT_PROPERTY_SEED=${seed} runs it again)`,
        );
        const tally: Tally = { admitted: 0, refused: 0 };
        await fc.assert(
          fc.asyncProperty(
            historyArbitrary({
              hybrid: counting === "hybrid",
              canReset: target.canReset,
              maxSteps: options.maxSteps,
            }),
            (history) => runHistory(target, history, counting, tally),
          ),
          { seed, numRuns: runs, endOnFailure: false },
        );
        // The histories reached the limits: the oracle had something to check.
        expect(tally.admitted).toBeGreaterThan(runs);
        expect(tally.refused).toBeGreaterThan(0);
      }, 240_000);

      for (const { name, history } of FIXED_HISTORIES) {
        it(`fixed: ${name}`, async () => {
          if (counting === "hybrid" && history.global.algorithm === "token-bucket") return;
          await runHistory(current(), history, counting, { admitted: 0, refused: 0 });
        });
      }
    });
  }
}
