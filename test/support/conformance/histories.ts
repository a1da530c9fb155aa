/**
 * The property that makes exactness a proof rather than a claim: random histories against a
 * store, through the real limiter, never admit more than a limit.
 *
 * A history is a fleet of two or three limiters ("processes") on one store, each with a clock
 * that is off by up to ±50 ms, sending requests that are counted up to 100 ms late, with costs
 * from 1 to 5, while the fleet reloads its policy (another limit, window or algorithm), resets
 * subjects and sees its store fail (before a call reaches it, or after it counted but before the
 * answer came back). The oracle reads the verdicts:
 *
 * - windowed rules: the units admitted in each window (the window a store counted them in, as
 *   its answer says, never one before the request's own) never exceed the limit of the policy
 *   in force, between two resets of the subject;
 * - token buckets: over any span of the stamps requests were counted at, the units admitted
 *   never exceed what a bucket of the limit refills over that span, plus one full bucket;
 * - exact counting loses nothing: a store's answer never shows a count below what it admitted
 *   in that window.
 *
 * Histories are bounded and seeded; the seed is printed, and `EDGELIMIT_PROPERTY_SEED` runs one
 * again (`EDGELIMIT_PROPERTY_RUNS` runs more). A shrunk counterexample goes into
 * `FIXED_HISTORIES` below.
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
import { windowIndexAt } from "../../../src/core/windows.js";
import type { Verdict } from "../../../src/http/respond.js";
import { createLimiter, type Limiter } from "../../../src/limiter.js";
import { definePolicy } from "../../../src/policy/load.js";
import type { ResolvedPolicy } from "../../../src/policy/types.js";
import { countedWindow, virtualStart } from "./contract.js";
import type { Target } from "./targets.js";

type Algorithm = "fixed-window" | "sliding-window" | "token-bucket";

export interface RuleShape {
  readonly algorithm: Algorithm;
  readonly limit: number;
  /** Seconds (policies take windows of 1 s or more). */
  readonly windowSeconds: number;
}

export type Step =
  | {
      readonly kind: "request";
      readonly limiter: number;
      readonly subject: number;
      /** 0: the global rule only; 1: a path rule too (two counters, one atomic call). */
      readonly path: number;
      readonly cost: number;
      readonly lateMs: number;
      readonly advanceMs: number;
    }
  | {
      /** Requests sent at once by every limiter: batched calls, reservations shared in flight. */
      readonly kind: "burst";
      readonly subject: number;
      readonly path: number;
      readonly perLimiter: number;
      readonly advanceMs: number;
    }
  | { readonly kind: "reload"; readonly global: RuleShape; readonly path: RuleShape }
  | { readonly kind: "reset"; readonly limiter: number; readonly subject: number }
  | { readonly kind: "fail"; readonly limiter: number; readonly after: boolean };

export interface History {
  readonly offsets: readonly number[];
  readonly global: RuleShape;
  readonly path: RuleShape;
  readonly steps: readonly Step[];
}

/** Counterexamples that shrinking found, kept as fixed cases (none pass on the old code). */
export const FIXED_HISTORIES: readonly { readonly name: string; readonly history: History }[] = [
  {
    name: "a request from the window before, after the limit was reached in the next",
    history: {
      offsets: [0, -3],
      global: { algorithm: "fixed-window", limit: 3, windowSeconds: 1 },
      path: { algorithm: "fixed-window", limit: 3, windowSeconds: 1 },
      steps: [
        // The first second starts with the limit reached by the process on time...
        ...[0, 1, 2].map((i) => request(0, { advanceMs: i === 0 ? 1000 : 1 })),
        // ...then the process 3 ms behind sends one stamped in the second before.
        request(1, {}),
        ...[0, 1, 2].map(() => request(0, { advanceMs: 1 })),
      ],
    },
  },
  {
    name: "a request counted late after another subject's request, at a newer time, swept its window's state",
    history: {
      offsets: [0, 0],
      global: { algorithm: "fixed-window", limit: 3, windowSeconds: 1 },
      path: { algorithm: "fixed-window", limit: 3, windowSeconds: 1 },
      steps: [
        request(0, { lateMs: 1 }),
        request(0, { subject: 1 }),
        request(0, { lateMs: 1 }),
        request(0, { lateMs: 1 }),
        request(0, { lateMs: 1 }),
      ],
    },
  },
];

function request(limiter: number, extra: Partial<Extract<Step, { kind: "request" }>>): Step {
  return {
    kind: "request",
    limiter,
    subject: 0,
    path: 0,
    cost: 1,
    lateMs: 0,
    advanceMs: 0,
    ...extra,
  };
}

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
    return fc.record({
      offsets: fc.array(fc.integer({ min: -50, max: 50 }), {
        minLength: limiters,
        maxLength: limiters,
      }),
      global: ruleShape(options.hybrid),
      path: ruleShape(options.hybrid),
      steps: fc.array(step, { minLength: 5, maxLength: options.maxSteps }),
    });
  });
}

/** A store that fails its next call on demand: before it reaches the store, or after. */
class FaultyStore implements Store {
  readonly name: string;
  readonly #inner: Store;
  failNext: "before" | "after" | undefined;

  constructor(inner: Store) {
    this.#inner = inner;
    this.name = inner.name;
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

/** What the oracle saw: enough to say that it checked something. */
export interface Tally {
  admitted: number;
  refused: number;
}

/** Runs one history against fresh stores of the target and checks every verdict. */
export async function runHistory(
  target: Target,
  history: History,
  counting: "exact" | "hybrid",
  tally: Tally,
): Promise<void> {
  const stores = (await target.stores(history.offsets.length)).map(
    (store) => new FaultyStore(store),
  );
  let time = virtualStart();
  let policy = policyOf(history.global, history.path, counting);
  let version = 0;
  const stamps = history.offsets.map(() => time);
  const limiters: Limiter[] = stores.map((store, i) =>
    createLimiter({
      policy,
      // Hybrid counting in front of each process's store, as a deployment builds it.
      store:
        counting === "hybrid"
          ? hybridCounting(store, { leaseMs: 20, clock: () => stamps[i] as number })
          : store,
      clock: () => stamps[i] as number,
      onStoreError: () => {},
    }),
  );
  const oracle = new Oracle(counting);
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
      time += step.advanceMs;
      const ip = `198.51.100.${step.subject + 1}`;
      const sent = limiters.flatMap((limiter, i) => {
        const stamp = time + (history.offsets[i] as number);
        stamps[i] = stamp;
        return Array.from({ length: step.perLimiter }, () =>
          limiter
            .check({ ip, path: step.path === 1 ? "/x" : "/" })
            .then((verdict) => ({ verdict, stamp })),
        );
      });
      // Settled in any order: the limits hold, but no one answer can show the others' counts.
      for (const { verdict, stamp } of await Promise.all(sent)) {
        oracle.record(verdict, policy, version, stamp, 1, tally, false);
      }
      continue;
    }
    const limiter = limiters[step.limiter] as Limiter;
    const offset = history.offsets[step.limiter] as number;
    const ip = `198.51.100.${step.subject + 1}`;
    if (step.kind === "reset") {
      stamps[step.limiter] = time + offset;
      try {
        await limiter.reset({ ip, path: "/x" });
      } catch {
        // The store failed the reset (an injected fault): nothing was forgotten.
        continue;
      }
      oracle.reset(`ip:${ip}`);
      continue;
    }
    time += step.advanceMs;
    const stamp = time + offset - step.lateMs;
    stamps[step.limiter] = stamp;
    const verdict = await limiter.check({
      ip,
      path: step.path === 1 ? "/x" : "/",
      cost: step.cost,
    });
    oracle.record(verdict, policy, version, stamp, step.cost, tally, true);
  }
}

/** Checks each verdict against the limits as it comes (see the file's header). */
class Oracle {
  readonly #exact: boolean;
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

  constructor(counting: "exact" | "hybrid") {
    this.#exact = counting === "exact";
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
      expect(window).toBeGreaterThanOrEqual(windowIndexAt(rule.window, stamp));
      const key = `${group}|${window}`;
      const admitted = (this.#admitted.get(key) ?? 0) + cost;
      this.#admitted.set(key, admitted);
      expect(admitted, `units admitted in window ${window} of ${rule.id}`).toBeLessThanOrEqual(
        rule.limit,
      );
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

/** The property over random histories, and the fixed counterexamples, for one target. */
export function describeHistories(
  current: () => Target,
  options: { readonly runs: number; readonly maxSteps: number },
): void {
  for (const counting of ["exact", "hybrid"] as const) {
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
