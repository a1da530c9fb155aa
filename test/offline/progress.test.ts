import { describe, expect, it } from "vitest";
import { eta, progressReporter } from "../../src/offline/progress.js";
import { describeReplay } from "../../src/replay/progress.js";
import { describeSimulation } from "../../src/simulate/progress.js";

/** A stream that says it is (or is not) a terminal and keeps what is written to it. */
function stream(isTTY: boolean): NodeJS.WriteStream & { written: string[] } {
  const written: string[] = [];
  return { isTTY, written, write: (text: string) => written.push(text) > 0 } as never;
}

describe("the progress line of offline runs", () => {
  it("writes only to a terminal, at most twice a second, and clears itself", () => {
    expect(progressReporter(stream(false), () => "x")).toBeUndefined();
    let now = 1_000;
    const terminal = stream(true);
    const line = progressReporter(
      terminal,
      (n: number, seconds) => `${n} after ${seconds} s`,
      () => now,
    );
    line?.update(1);
    now += 499;
    line?.update(2);
    now += 1;
    line?.update(3);
    now += 200;
    line?.update(4);
    now += 300;
    line?.update(5);
    line?.done();
    expect(terminal.written).toEqual([
      "\r3 after 0.5 s\u001b[K",
      "\r5 after 1 s\u001b[K",
      "\r\u001b[K",
    ]);
  });

  it("says the time left from the share done", () => {
    expect(eta(0.25, 10)).toBe(", ETA 30 s");
    expect(eta(0, 10)).toBe("");
    expect(eta(1, 10)).toBe("");
  });

  it("says a simulation's mode, virtual time and time left, and a replay's lines and bytes", () => {
    const simulation = {
      mode: "exact",
      modeIndex: 1,
      modes: 3,
      simulatedMs: 60_000,
      totalMs: 120_000,
    } as const;
    // Half of the second of three modes: half done after 30 s, 30 s left.
    expect(describeSimulation(simulation, 30)).toBe(
      "simulating exact (mode 2 of 3): 1:00 of 2:00 simulated, ETA 30 s",
    );
    expect(
      describeReplay({ lines: 250_000, bytesRead: 1_048_576, totalBytes: 4_194_304, held: 0 }, 2),
    ).toBe("250,000 lines, 125,000 lines/s, 1.0 MB of 4.0 MB read, ETA 6 s");
  });
});
