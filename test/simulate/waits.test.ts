import { describe, expect, it } from "vitest";
import { WaitCauses } from "../../src/simulate/waits.js";

const MINUTE = 60_000;

describe("why legitimate decisions waited", () => {
  it("counts a wait only beyond the region's own store, and puts it down to what the process and the region saw before", () => {
    // The region's own store is 6 ms away: a decision over 16 ms waited for something farther.
    const waits = new WaitCauses(MINUTE, () => 6);
    const key = ["anonymous.global\u0000ip:a"];
    // Window 0: new to the region (waited), then held units at process 1 (no wait).
    waits.legitimate("ap", 1, key, 1_000, 220);
    waits.legitimate("ap", 1, key, 2_000, 0);
    // Same window, process 1 again, but its units were spent: ran out.
    waits.legitimate("ap", 1, key, 3_000, 221);
    // Process 2 has not seen the subject, the region has: a regional holder would answer it.
    waits.legitimate("ap", 2, key, 4_000, 222);
    // Window 1: process 1 saw it the window before.
    waits.legitimate("ap", 1, key, MINUTE + 1_000, 220);
    // Window 3: nobody in the region saw it in window 2 or 3: new again. A decision at the
    // store's own round trip plus less than 10 ms did not wait.
    waits.legitimate("ap", 1, key, 3 * MINUTE + 1_000, 220);
    waits.legitimate("ap", 3, ["other\u0000ip:b"], 3 * MINUTE + 2_000, 15);
    expect(waits.byRegion()).toEqual({
      ap: {
        requests: 7,
        waited: 5,
        heldRanOut: 1,
        seenHereWindowBefore: 1,
        seenInRegion: 1,
        newInRegion: 2,
      },
    });
  });

  it("needs every rule of the request seen: a path rule new to the process makes the wait its own", () => {
    const waits = new WaitCauses(MINUTE, () => 6);
    waits.legitimate("eu", 1, ["global\u0000ip:a"], 1_000, 80);
    waits.legitimate("eu", 1, ["global\u0000ip:a", "path\u0000ip:a"], 2_000, 80);
    expect(waits.byRegion().eu).toMatchObject({ waited: 2, heldRanOut: 0, newInRegion: 2 });
  });
});
