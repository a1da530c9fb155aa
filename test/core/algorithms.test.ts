import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Algorithm, CounterRule } from "../../src/core/algorithms/index.js";
import { fixedWindow, slidingWindow, tokenBucket } from "../../src/core/algorithms/index.js";
import { parseWindow } from "../../src/core/duration.js";
import { windowAt } from "../../src/core/windows.js";
import { IN_PLACE_ALGORITHMS } from "../../src/stores/memory-in-place.js";

const MINUTE = 60_000;
// 2026-02-14 14:30:00 UTC, a minute boundary (the seed's example window).
const T0 = Date.UTC(2026, 1, 14, 14, 30, 0);

/** Drives one counter the way a store does: allows, then count, then describe. */
function drive<S>(algorithm: Algorithm<S>, rule: CounterRule) {
  let state: S | undefined;
  const hit = (now: number) => {
    const allowed = algorithm.allows(state, now, rule);
    state = algorithm.count(state, now, rule, allowed);
    return algorithm.describe(state, now, rule, allowed);
  };
  /** Would a request pass at `now`? Counts nothing. */
  hit.peek = (now: number) => algorithm.allows(state, now, rule);
  return hit;
}

function burst(hit: (now: number) => { allowed: boolean }, at: number, count: number): number {
  let admitted = 0;
  for (let i = 0; i < count; i++) if (hit(at).allowed) admitted++;
  return admitted;
}

describe("fixed window", () => {
  const rule: CounterRule = { limit: 60, window: { ms: MINUTE }, cost: 1 };

  it("admits the limit, then refuses until the window ends, with the real Retry-After", () => {
    const hit = drive(fixedWindow, rule);
    expect(burst(hit, T0 + 10_000, 60)).toBe(60);
    const refused = hit(T0 + 10_000);
    expect(refused.allowed).toBe(false);
    expect(refused.remaining).toBe(0);
    expect(refused.retryAfterMs).toBe(50_000);
    expect(refused.resetAt).toBe(T0 + MINUTE);
    expect(hit(T0 + MINUTE).allowed).toBe(true);
  });

  it("lets the seed's edge burst through: 60 at second 55 and 60 at second 05 of the next minute", () => {
    const hit = drive(fixedWindow, rule);
    const first = burst(hit, T0 + 55_000, 60);
    const second = burst(hit, T0 + MINUTE + 5_000, 60);
    expect(first + second).toBe(120);
  });

  it("counts refused requests on the refusing counter (the seed's ADD keeps counting)", () => {
    const hit = drive(fixedWindow, rule);
    burst(hit, T0, 70);
    expect(hit(T0).count).toBe(71);
  });

  it("aligns windows to the epoch so every process agrees", () => {
    expect(windowAt({ ms: MINUTE }, T0 + 59_999).index).toBe(T0 / MINUTE);
    expect(windowAt({ ms: MINUTE }, T0 + 60_000).index).toBe(T0 / MINUTE + 1);
  });

  it("counts a calendar month exactly, resetting on the first of the next month (UTC)", () => {
    const monthly: CounterRule = { limit: 1000, window: parseWindow("1mo"), cost: 1 };
    const hit = drive(fixedWindow, monthly);
    const jan31 = Date.UTC(2026, 0, 31, 23, 59, 59);
    expect(burst(hit, Date.UTC(2026, 0, 1), 999)).toBe(999);
    expect(hit(jan31).allowed).toBe(true);
    const over = hit(jan31);
    expect(over.allowed).toBe(false);
    expect(over.resetAt).toBe(Date.UTC(2026, 1, 1));
    expect(over.retryAfterMs).toBe(1000);
    expect(hit(Date.UTC(2026, 1, 1)).allowed).toBe(true);
  });

  it("charges the cost of a request", () => {
    const hit = drive(fixedWindow, { ...rule, limit: 10, cost: 4 });
    expect(hit(T0).remaining).toBe(6);
    expect(hit(T0).remaining).toBe(2);
    expect(hit(T0).allowed).toBe(false);
  });
});

describe("sliding window", () => {
  const rule: CounterRule = { limit: 60, window: { ms: MINUTE }, cost: 1 };

  it("stops the seed's edge burst that the fixed window lets through", () => {
    const hit = drive(slidingWindow, rule);
    expect(burst(hit, T0 + 55_000, 60)).toBe(60);
    // At second 05 of the next minute, 55/60 of the previous window still weighs in.
    const second = burst(hit, T0 + MINUTE + 5_000, 60);
    expect(second).toBe(5);
  });

  it("weights the previous window by how much of it is still inside the sliding window", () => {
    const hit = drive(slidingWindow, rule);
    burst(hit, T0 + 1_000, 60);
    // Half-way through the next window, 30 of the previous 60 still count.
    expect(burst(hit, T0 + MINUTE + 30_000, 60)).toBe(30);
  });

  it("reports when a refused client may pass again", () => {
    const hit = drive(slidingWindow, rule);
    burst(hit, T0, 60);
    const refused = hit(T0 + 30_000);
    expect(refused.allowed).toBe(false);
    // 61 counted this window: in the next window 61 * (1 - e/60s) + 1 <= 60 when e >= ~0.98 s.
    const passAt = T0 + 30_000 + refused.retryAfterMs;
    expect(hit.peek(passAt - 100)).toBe(false);
    expect(hit.peek(passAt)).toBe(true);
  });
});

describe("token bucket (GCRA)", () => {
  const rule: CounterRule = { limit: 10, window: { ms: 10_000 }, cost: 1 };

  it("allows a burst of the limit, then one request per emission interval", () => {
    const hit = drive(tokenBucket, rule);
    expect(burst(hit, T0, 15)).toBe(10);
    const refused = hit(T0);
    expect(refused.retryAfterMs).toBe(1000);
    expect(hit.peek(T0 + 999)).toBe(false);
    expect(hit(T0 + 1000).allowed).toBe(true);
    expect(hit(T0 + 1000).allowed).toBe(false);
  });

  it("never records a refused request", () => {
    const hit = drive(tokenBucket, rule);
    burst(hit, T0, 10);
    burst(hit, T0, 1000);
    expect(hit(T0 + 1000).allowed).toBe(true);
  });

  it("refills fully after the window and reports remaining tokens", () => {
    const hit = drive(tokenBucket, rule);
    burst(hit, T0, 10);
    const later = hit(T0 + 10_000);
    expect(later.allowed).toBe(true);
    expect(later.remaining).toBe(9);
  });

  it("handles emission intervals that are not whole milliseconds", () => {
    const hit = drive(tokenBucket, { limit: 7, window: { ms: MINUTE }, cost: 1 });
    expect(burst(hit, T0, 20)).toBe(7);
  });
});

describe("counting in place", () => {
  it("fixed window: the memory store's countInPlace gives the same states and answers as allows, count, describe, late requests included", () => {
    const countInPlace = IN_PLACE_ALGORITHMS["fixed-window"].countInPlace;
    if (countInPlace === undefined) throw new Error("fixed window counts in place");
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 20 }),
        fc.integer({ min: 1, max: 3 }),
        fc.constantFrom({ ms: 30_000 }, { months: 1 }),
        // A negative gap is a request stamped before the one before it (counted late).
        fc.array(fc.integer({ min: -200, max: 90_000 }), { minLength: 1, maxLength: 60 }),
        (limit, cost, window, gaps) => {
          const rule: CounterRule = { limit, window, cost };
          // Calendar months need gaps of days to cross their edges.
          const scale = "months" in window ? 3_000 : 1;
          let now = T0;
          let pure = fixedWindow.count(
            undefined,
            now,
            rule,
            fixedWindow.allows(undefined, now, rule),
          );
          const inPlace = { ...pure };
          for (const gap of gaps) {
            now += gap * scale;
            const allowed = fixedWindow.allows(pure, now, rule);
            pure = fixedWindow.count(pure, now, rule, allowed);
            expect(countInPlace(inPlace, now, rule)).toEqual(
              fixedWindow.describe(pure, now, rule, allowed),
            );
            expect(inPlace).toEqual(pure);
          }
        },
      ),
    );
  });
});

describe("expired states", () => {
  // Stores may keep a state past `expiresAt` and count on it (the memory store does, to reuse
  // a returning client's entry): every step must then answer exactly as on no state at all.
  const algorithms = [fixedWindow, slidingWindow, tokenBucket] as Algorithm<unknown>[];
  const rules: CounterRule[] = [
    { limit: 5, window: { ms: MINUTE }, cost: 1 },
    { limit: 3, window: { ms: 10_000 }, cost: 2 },
    { limit: 100, window: parseWindow("1h"), cost: 7 },
  ];
  it("carry no information: allows, count and describe answer as for a new counter", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: algorithms.length - 1 }),
        fc.integer({ min: 0, max: rules.length - 1 }),
        fc.array(fc.integer({ min: 0, max: 20_000 }), { minLength: 1, maxLength: 30 }),
        fc.integer({ min: 0, max: 4 * MINUTE }),
        (which, ruleIndex, gaps, past) => {
          const algorithm = algorithms[which] as Algorithm<unknown>;
          const rule = rules[ruleIndex] as CounterRule;
          let state: unknown;
          let now = T0;
          for (const gap of gaps) {
            now += gap;
            const allowed = algorithm.allows(state, now, rule);
            state = algorithm.count(state, now, rule, allowed);
          }
          const later = Math.max(now, algorithm.expiresAt(state, now, rule)) + past;
          const allowed = algorithm.allows(state, later, rule);
          expect(allowed).toBe(algorithm.allows(undefined, later, rule));
          const counted = algorithm.count(state, later, rule, allowed);
          const fresh = algorithm.count(undefined, later, rule, allowed);
          expect(algorithm.describe(counted, later, rule, allowed)).toEqual(
            algorithm.describe(fresh, later, rule, allowed),
          );
          expect(algorithm.expiresAt(counted, later, rule)).toBe(
            algorithm.expiresAt(fresh, later, rule),
          );
          const countInPlace =
            IN_PLACE_ALGORITHMS[algorithm.name as keyof typeof IN_PLACE_ALGORITHMS].countInPlace;
          if (countInPlace !== undefined) {
            const inPlace = countInPlace(structuredClone(state), later, rule);
            expect(inPlace).toEqual(algorithm.describe(fresh, later, rule, allowed));
          }
        },
      ),
    );
  });
});
