import { describe, expect, it } from "vitest";
import { chunkSize } from "../../src/core/hybrid/holder-size.js";
import { newReservation, rateOf } from "../../src/core/reservation.js";
import type { CounterSpec } from "../../src/core/types.js";

/** The start of a minute's window. */
const T0 = Date.UTC(2026, 10, 30, 12, 0, 0);
const MINUTE = 60_000;

const key: CounterSpec = {
  key: "key:enterprise|global|authenticated",
  subject: "key:enterprise",
  ruleId: "authenticated.global",
  namespace: "global",
  limit: 10_000,
  window: { ms: MINUTE },
  algorithm: "fixed-window",
  cost: 1,
  mode: "enforce",
  counting: "hybrid",
};

/**
 * An instance's reservation for the key in the window after one in which its region took the
 * whole limit (the key was refused beyond it) and this instance admitted 500 of it.
 */
function afterAFullWindow(at: number) {
  const previous = newReservation(undefined, key.window, T0 - MINUTE);
  previous.used = 500;
  previous.region = { taken: 0, granted: 10_000, left: 0, storeCount: 10_000 };
  return newReservation(previous, key.window, at);
}

describe("chunks a process takes from its region's holder", () => {
  it("treats a subject that used its whole limit the window before as on its way to it: 2 s of its rate, not the window's first half", () => {
    const at = T0 + 1;
    const reservation = afterAFullWindow(at);
    // The region has topped up its holder once this window (nearly every unit is its own).
    reservation.region = { taken: 50, granted: 300, left: 250, storeCount: 300 };
    // Its units never pass the limit, so the region's demand measured by them is the limit:
    // no more than what is left, however far beyond the limit its requests are.
    const ask = chunkSize(reservation, key, at, T0 + MINUTE / 2);
    expect(ask).toBeLessThanOrEqual(key.cost + Math.ceil(rateOf(reservation, at) * 2000));
    expect(ask).toBeGreaterThan(key.cost);
  });

  it("takes less as the region's units run out: what an instance holds then is stranded", () => {
    const at = T0 + 50_000;
    const reservation = afterAFullWindow(at);
    reservation.used = 400;
    // The lease item has granted the whole limit; the region's holder has 100 left, a fraction
    // of a second at the region's rate.
    reservation.storeCount = 10_000;
    reservation.region = { taken: 10, granted: 8_000, left: 100, storeCount: 10_000 };
    const twoSeconds = key.cost + Math.ceil(rateOf(reservation, at) * 2000);
    const ask = chunkSize(reservation, key, at, T0 + MINUTE);
    expect(ask).toBeLessThan(twoSeconds / 4);
    expect(ask).toBeGreaterThan(key.cost);
  });
});
