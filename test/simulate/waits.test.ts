import { describe, expect, it } from "vitest";
import { WaitCauses } from "../../src/simulate/waits.js";

const MINUTE = 60_000;

describe("why legitimate decisions waited", () => {
  it("counts a wait only beyond the region's own store, and puts it down to what the process and the region saw before", () => {
    // The region's own store is 6 ms away: a decision over 16 ms waited for something farther.
    const waits = new WaitCauses(MINUTE, () => 6);
    const key = ["anonymous.global\u0000ip:a"];
    // Window 0: new to the region (waited), then held units at process 1 (no wait).
    waits.legitimate("ap", 1, "ip:a", key, 1_000, 220);
    waits.legitimate("ap", 1, "ip:a", key, 2_000, 0);
    // Same window, process 1 again, but its units were spent: ran out.
    waits.legitimate("ap", 1, "ip:a", key, 3_000, 221);
    // Process 2 has not seen the subject, the region has: a regional holder would answer it.
    waits.legitimate("ap", 2, "ip:a", key, 4_000, 222);
    // Window 1: process 1 saw it the window before.
    waits.legitimate("ap", 1, "ip:a", key, MINUTE + 1_000, 220);
    // Window 3: nobody in the region saw it in window 2 or 3: new again. A decision at the
    // store's own round trip plus less than 10 ms did not wait.
    waits.legitimate("ap", 1, "ip:a", key, 3 * MINUTE + 1_000, 220);
    waits.legitimate("ap", 3, "ip:b", ["other\u0000ip:b"], 3 * MINUTE + 2_000, 15);
    expect(waits.byRegion()).toEqual({
      ap: {
        requests: 7,
        waited: 5,
        heldRanOut: 1,
        seenHereWindowBefore: 1,
        seenInRegion: 1,
        newInRegion: 2,
        topSubjects: [{ subject: "ip:a", waited: 5 }],
      },
    });
  });

  it("names the subjects that waited most in each region, most first, at most three", () => {
    const waits = new WaitCauses(MINUTE, () => 6);
    const waitFor = (subject: string, times: number) => {
      for (let i = 0; i < times; i++) {
        waits.legitimate("sa", i, subject, [`global\u0000${subject}`], 1_000 + i, 120);
      }
    };
    waitFor("user:b", 2);
    waitFor("user:a", 7);
    waitFor("user:d", 1);
    waitFor("user:c", 2);
    // Answered at the region's own latency: not a wait, not named.
    waits.legitimate("sa", 1, "user:e", ["global\u0000user:e"], 2_000, 7);
    expect(waits.byRegion().sa?.topSubjects).toEqual([
      { subject: "user:a", waited: 7 },
      { subject: "user:b", waited: 2 },
      { subject: "user:c", waited: 2 },
    ]);
  });

  it("needs every rule of the request seen: a path rule new to the process makes the wait its own", () => {
    const waits = new WaitCauses(MINUTE, () => 6);
    waits.legitimate("eu", 1, "ip:a", ["global\u0000ip:a"], 1_000, 80);
    waits.legitimate("eu", 1, "ip:a", ["global\u0000ip:a", "path\u0000ip:a"], 2_000, 80);
    expect(waits.byRegion().eu).toMatchObject({ waited: 2, heldRanOut: 0, newInRegion: 2 });
  });
});
