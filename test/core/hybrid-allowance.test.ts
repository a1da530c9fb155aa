import { describe, expect, it } from "vitest";
import { claimEarly, reclaimAllowances } from "../../src/core/hybrid/allowance.js";
import { refusedFull } from "../../src/core/hybrid/holder.js";
import { newReservation } from "../../src/core/reservation.js";
import type { CounterSpec, CounterState, RegionAllowances, Store } from "../../src/core/types.js";

const T0 = Date.UTC(2026, 11, 1, 12, 0, 0);
const counter: CounterSpec = {
  key: "ip:1|default|global",
  subject: "ip:1",
  algorithm: "fixed-window",
  limit: 3,
  window: { ms: 1000 },
  cost: 2,
  mode: "enforce",
  ruleId: "global",
  namespace: "default",
  counting: "hybrid",
};

/** Allowances that record what they were asked, as the DynamoDB store's would do it. */
function recording(): RegionAllowances & { refunds: number[]; claims: number } {
  const refunds: number[] = [];
  const self = {
    refunds,
    claims: 0,
    covers: () => true,
    async claim() {
      self.claims++;
      return true;
    },
    async reclaim(_counter: CounterSpec, _now: number, refund: number) {
      refunds.push(refund);
      return 2;
    },
    async refund() {
      return 0;
    },
  };
  return self;
}

function refused(count: number, heldBack: number): CounterState {
  return { allowed: false, count, remaining: 0, resetAt: T0 + 1000, retryAfterMs: 900, heldBack };
}

describe("hybrid counting's region allowances, in the layer", () => {
  it("a refusal gives back only the units its reservation counted beyond its grant: a grant short of the cost may be held and spent", () => {
    const allowances = recording();
    const reservation = newReservation(undefined, counter.window, T0);
    // 3 less 2 held back, 0 before this ask of 2: 1 granted (short of the cost), 1 not.
    const state = reclaimAllowances(allowances, counter, reservation, 2, refused(4, 2), T0, 40);
    expect(allowances.refunds).toEqual([1]);
    // Refused with a retry as long as the revocations take, not to the window's end.
    expect(state.allowed).toBe(false);
    expect(state.retryAfterMs).toBe(40);
    // Once a window in each process.
    reclaimAllowances(allowances, counter, reservation, 2, refused(5, 2), T0, 40);
    expect(allowances.refunds).toEqual([1]);
  });

  it("nothing held back, nothing reclaimed: the refusal is the store's", () => {
    const allowances = recording();
    const reservation = newReservation(undefined, counter.window, T0);
    const state = reclaimAllowances(allowances, counter, reservation, 1, refused(4, 0), T0, 40);
    expect(allowances.refunds).toEqual([]);
    expect(state.retryAfterMs).toBe(900);
  });

  it("claims early only where this process saw nothing of the subject, this window or the one before, and once", () => {
    const allowances = recording();
    const one = { ...counter, cost: 1 };
    const fresh = newReservation(undefined, one.window, T0);
    const seen = newReservation(undefined, one.window, T0);
    seen.used = 1;
    const claims = claimEarly(allowances, [one, one], [0, 1], [fresh, seen], T0, undefined);
    expect([...claims.keys()]).toEqual([0]);
    expect(fresh.allowanceTried).toBe(true);
    expect(claimEarly(allowances, [one], [0], [fresh], T0, undefined).size).toBe(0);
    // A request of more than one unit never spends an allowance (it is one unit).
    const big = newReservation(undefined, counter.window, T0);
    expect(claimEarly(allowances, [counter], [0], [big], T0, undefined).size).toBe(0);
    expect(allowances.claims).toBe(1);
  });

  it("a region's holder marked full refuses the subject there without a call, for a while, then asks again", () => {
    const reservation = newReservation(undefined, counter.window, T0);
    expect(refusedFull(reservation, counter, T0)).toBeUndefined();
    reservation.regionFullUntil = T0 + 300;
    const refused = refusedFull(reservation, counter, T0 + 100);
    expect(refused?.allowed).toBe(false);
    expect(refused?.retryAfterMs).toBe(200);
    expect(refusedFull(reservation, counter, T0 + 300)).toBeUndefined();
  });
});

describe("hybrid counting with a region holder, when the holder fails", () => {
  it("a late take that fails after the lease item refused leaves the refusal: the store answered, so it is not a store failure", async () => {
    const { HybridCounting } = await import("../../src/core/hybrid-counting.js");
    let takes = 0;
    const inner: Store = {
      name: "fake",
      // The lease item is full: every reservation is counted beyond the limit.
      async apply(counters) {
        return counters.map((spec) => ({
          allowed: true,
          count: spec.limit + spec.cost,
          remaining: 0,
          resetAt: T0 + 1000,
          retryAfterMs: 0,
        }));
      },
      holder: {
        async take() {
          takes++;
          // The first take finds the holder empty; the one after the lease item's refusal fails.
          if (takes === 1) return { taken: 0, granted: 0, left: 0, storeCount: 0 };
          throw new Error("the region's replica did not answer");
        },
        async fill() {
          return { taken: 0, granted: 0, left: 0, storeCount: 0 };
        },
      },
    };
    const layer = new HybridCounting(inner, { clock: () => T0 });
    const one = { ...counter, cost: 1 };
    const [state] = await layer.apply([one], T0);
    expect(takes).toBe(2);
    expect(state?.allowed).toBe(false);
  });
});
