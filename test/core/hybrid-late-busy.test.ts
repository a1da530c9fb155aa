import { describe, expect, it } from "vitest";
import { newReservation, rateOf, reservationSize } from "../../src/core/reservation.js";
import type { CounterSpec, CounterState, Store } from "../../src/core/types.js";
import { definePolicy } from "../../src/policy/load.js";
import { MemoryStore } from "../../src/stores/memory.js";
import { burstFleet } from "../support/hybrid-fleet.js";

/** The start of an hour's window (UTC-aligned). */
const HOUR = Date.UTC(2026, 10, 30, 12, 0, 0);
const QUARTER = 15 * 60_000;

/** One shared counter store reached asynchronously, as a remote store is: counts its calls. */
class SharedStore implements Store {
  readonly name = "shared";
  readonly local = false;
  readonly memory = new MemoryStore();
  calls = 0;

  async apply(counters: readonly CounterSpec[], now: number): Promise<CounterState[]> {
    this.calls++;
    await new Promise((resolve) => setImmediate(resolve));
    return this.memory.applySync(counters, now);
  }
}

const counter: CounterSpec = {
  key: "ip:203.0.113.7|global|anonymous",
  subject: "ip:203.0.113.7",
  ruleId: "anonymous.global",
  namespace: "global",
  limit: 1_000_000,
  window: { ms: 3_600_000 },
  algorithm: "fixed-window",
  cost: 1,
  mode: "enforce",
  counting: "hybrid",
};

describe("hybrid sizing for a subject that turns busy late in a long window", () => {
  it("measures its rate from the first request this process saw in the window, not the window's start", () => {
    const reservation = newReservation(undefined, counter.window, HOUR + QUARTER);
    // 500 a second for 10 s, a quarter of an hour into the window.
    reservation.used = 5000;
    reservation.storeCount = 5000;
    reservation.reserved = 5000;
    const now = HOUR + QUARTER + 10_000;
    expect(rateOf(reservation, now)).toBeCloseTo(0.5, 2);
    // Far from its limit it reserves for the rest of the window at that rate (within its share).
    expect(reservationSize(reservation, counter, now, 2000)).toBeGreaterThanOrEqual(1000);
  });

  it("measures the window before from the first request seen in it too", () => {
    const previous = newReservation(undefined, counter.window, HOUR + 3 * QUARTER);
    previous.used = 450_000;
    const reservation = newReservation(previous, counter.window, HOUR + 3_600_000);
    // 450,000 in the last quarter hour: 0.5 a ms, not an hour's average of an eighth of that.
    expect(rateOf(reservation, HOUR + 3_600_000 + 1)).toBeGreaterThan(0.45);
  });

  it("costs a subject that turns busy in a minute's last quarter few calls: its reservations follow its rate", async () => {
    const policy = definePolicy({
      tiers: { anonymous: { global: { limit: 1_000_000, window: "1m", counting: "hybrid" } } },
    });
    async function callsPerRequest(offset: number): Promise<number> {
      const store = new SharedStore();
      // Four processes, five concurrent requests each every 50 ms (400 a second), 7.5 s.
      const { sent } = await burstFleet({
        policy,
        stores: [store, store, store, store],
        ip: "203.0.113.7",
        rounds: 150,
        perProcess: 5,
        start: HOUR + offset,
        stepMs: 50,
      });
      return store.calls / sent;
    }
    // From the window's start: about 0.005. Measured from the window's start, a subject busy
    // from 45 s in was taken for a ninth of its rate or less and cost 0.027.
    expect(await callsPerRequest(0)).toBeLessThan(0.015);
    expect(await callsPerRequest(45_000)).toBeLessThan(0.015);
  });
});
