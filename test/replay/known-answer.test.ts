import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadPolicy } from "../../src/index.js";
import { makeRecord } from "../../src/replay/record.js";
import { replayLogs } from "../../src/replay/replay.js";
import { PolicyReplay } from "../../src/replay/runner.js";
import { combinedLine, fixture, T0 } from "./helpers.js";

/**
 * A synthetic log whose answer is known per subject and minute, for one rule of each algorithm
 * (fixture algorithms.yaml: fixed 5/min, sliding 10/min, token bucket 6/min).
 */
const traffic: { ip: string; at: number; path: string }[] = [];
function burst(ip: string, path: string, startSeconds: number, count: number): void {
  for (let i = 0; i < count; i++) traffic.push({ ip, path, at: T0 + (startSeconds + i) * 1000 });
}
// Fixed window, 5 per minute.
burst("203.0.113.1", "/fixed", 0, 8); // minute 0: 5 allowed, 3 refused
burst("203.0.113.1", "/fixed", 60, 3); // minute 1: 3 allowed
burst("203.0.113.1", "/fixed", 120, 12); // minute 2: 5 allowed, 7 refused
burst("203.0.113.2", "/fixed", 10, 5); // minute 0: 5 allowed
burst("2001:db8:1:1::1", "/fixed", 20, 4); // the same /64 as the next: one subject
burst("2001:db8:1:1::2", "/fixed", 30, 4); // minute 0: 8 in all, 5 allowed, 3 refused
// Sliding window, 10 per minute: 8 at 0:00-0:07, then 8 at 1:30-1:37. The k-th of the second
// burst sees 8 * (30 - k) / 60 + k of the previous and current window: 6 pass, 2 do not.
burst("203.0.113.3", "/sliding", 0, 8);
burst("203.0.113.3", "/sliding", 90, 8);
// Token bucket, 6 per minute (one token every 10 s): 10 at once, then 5 at 0:30.
traffic.push(...Array.from({ length: 10 }, () => ({ ip: "203.0.113.4", path: "/bucket", at: T0 })));
traffic.push(
  ...Array.from({ length: 5 }, () => ({ ip: "203.0.113.4", path: "/bucket", at: T0 + 30_000 })),
);
traffic.sort((a, b) => a.at - b.at);

/** Allowed and refused per `subject minute`. */
const expected: Record<string, [number, number]> = {
  "ip:203.0.113.1 0": [5, 3],
  "ip:203.0.113.1 1": [3, 0],
  "ip:203.0.113.1 2": [5, 7],
  "ip:203.0.113.2 0": [5, 0],
  "ip:2001%3Adb8%3A1%3A1%3A%3A/64 0": [5, 3],
  "ip:203.0.113.3 0": [8, 0],
  "ip:203.0.113.3 1": [6, 2],
  "ip:203.0.113.4 0": [9, 6],
};

const dir = mkdtempSync(join(tmpdir(), "edgelimit-replay-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("a synthetic log with a known answer", () => {
  it("gives the known allowed and refused count per subject and minute", async () => {
    const replay = new PolicyReplay(
      "algorithms.yaml",
      loadPolicy(fixture("algorithms.yaml")),
      false,
    );
    const seen: Record<string, [number, number]> = {};
    for (const [i, request] of traffic.entries()) {
      const record = makeRecord(
        request.at,
        request.ip,
        "GET",
        request.path,
        undefined,
        200,
        undefined,
        undefined,
        i + 1,
      );
      const verdict = await replay.decide(record);
      const key = `${verdict.subject} ${Math.floor((request.at - T0) / 60_000)}`;
      const counts = seen[key] ?? [0, 0];
      counts[verdict.action === "allow" ? 0 : 1]++;
      seen[key] = counts;
    }
    expect(seen).toEqual(expected);
  });

  it("reports the same through the whole pipeline, with each subject's peak per window", async () => {
    const log = join(dir, "synthetic.log");
    writeFileSync(log, `${traffic.map((r) => combinedLine(r.ip, r.at, r.path)).join("\n")}\n`);
    const { report } = await replayLogs({ policy: fixture("algorithms.yaml"), inputs: [log] });
    expect(report.requests).toBe(traffic.length);
    const rule = (id: string) => report.rules.find((r) => r.id === id);
    expect(rule("fixed")).toMatchObject({
      matched: 36,
      allowed: 23,
      refused: 13,
      blocked: 13,
      subjects: 3,
      refusedSubjects: 2,
      peaks: { subjects: 3, p50: 8, max: 12 },
    });
    expect(rule("sliding")).toMatchObject({
      matched: 16,
      allowed: 14,
      refused: 2,
      refusedSubjects: 1,
    });
    expect(rule("bucket")).toMatchObject({
      matched: 15,
      allowed: 9,
      refused: 6,
      refusedSubjects: 1,
    });
    expect(rule("bucket")?.peaks.max).toBe(15);
    // At most 0.1% of 3 subjects is none: the limit that fits is the highest peak. Five
    // subject-windows are no evidence for a change: none is suggested.
    expect(rule("fixed")?.suggestion).toMatchObject({
      fits: 12,
      refusedSubjects: 0,
      subjectWindows: 5,
      suggestedLimit: null,
    });
    expect(report.actions).toEqual({ allow: 46, block: 21, challenge: 0, unavailable: 0 });
  });

  it("suggests the lowest limit that refuses at most the share asked for", async () => {
    // 1000 subjects on /fixed: subject i makes (i % 100) + 1 requests in one minute.
    const lines: string[] = [];
    for (let i = 0; i < 1000; i++) {
      const ip = `10.${Math.floor(i / 250)}.${i % 250}.1`;
      for (let n = 0; n <= i % 100; n++) lines.push(combinedLine(ip, T0 + n * 100, "/fixed"));
    }
    lines.sort((a, b) => (a.slice(a.indexOf("[")) < b.slice(b.indexOf("[")) ? -1 : 1));
    const log = join(dir, "many.log");
    writeFileSync(log, `${lines.join("\n")}\n`);
    const { report } = await replayLogs({
      policy: fixture("algorithms.yaml"),
      inputs: [log],
      refuseAtMost: 0.05,
    });
    const fixed = report.rules.find((r) => r.id === "fixed");
    // Peaks 1..100, ten subjects each: 5% is 50 subjects, those with peaks 96..100.
    expect(fixed?.peaks).toMatchObject({ subjects: 1000, p50: 50, p90: 90, p99: 99, max: 100 });
    expect(fixed?.suggestion).toMatchObject({ suggestedLimit: 95, refusedSubjects: 50 });
  });

  /** A log of /fixed (5 a minute): `[requests in the minute, minutes]` per subject. */
  async function tuned(
    subjects: readonly [number, number][],
    refuseAtMost: number,
    tighten = false,
  ) {
    const lines: { at: number; line: string }[] = [];
    subjects.forEach(([perMinute, minutes], i) => {
      const ip = `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
      for (let minute = 0; minute < minutes; minute++) {
        for (let n = 0; n < perMinute; n++) {
          const at = T0 + minute * 60_000 + n * 500 + (i % 400);
          lines.push({ at, line: combinedLine(ip, at, "/fixed") });
        }
      }
    });
    lines.sort((a, b) => a.at - b.at);
    const log = join(dir, `tuned-${subjects.length}-${refuseAtMost}.log`);
    writeFileSync(log, `${lines.map((entry) => entry.line).join("\n")}\n`);
    const { report } = await replayLogs({
      policy: fixture("algorithms.yaml"),
      inputs: [log],
      refuseAtMost,
      tighten,
    });
    return report.rules.find((r) => r.id === "fixed")?.suggestion;
  }

  it("suggests no change from fewer than 1,000 subject-windows", async () => {
    // 200 clients, one request each: the limit that fits is 1, but that is no evidence for it.
    const few = await tuned(
      Array.from({ length: 200 }, () => [1, 1]),
      0.001,
    );
    expect(few).toMatchObject({ fits: 1, subjectWindows: 200, suggestedLimit: null });
    expect(few?.withheld).toMatch(/200 subject-windows seen; a suggestion needs 1,000/);
    // The same clients over five minutes are 1,000 subject-windows: 5 -> 1 admits them all.
    const enough = await tuned(
      Array.from({ length: 200 }, () => [1, 5]),
      0.001,
    );
    expect(enough).toMatchObject({ fits: 1, subjectWindows: 1000, suggestedLimit: 1 });
  });

  it("never suggests a limit below the peak of the subjects it admits today, unless asked", async () => {
    // 990 clients at 1 a minute and 10 at 4 (under the limit of 5): refusing 1% of them fits 1,
    // which would start refusing the ten clients who pass today.
    const subjects: [number, number][] = [
      ...Array.from({ length: 990 }, (): [number, number] => [1, 1]),
      ...Array.from({ length: 10 }, (): [number, number] => [4, 1]),
    ];
    expect(await tuned(subjects, 0.01)).toMatchObject({
      fits: 1,
      admittedPeak: 4,
      suggestedLimit: 4,
      refusedSubjects: 0,
    });
    expect(await tuned(subjects, 0.01, true)).toMatchObject({
      fits: 1,
      suggestedLimit: 1,
      refusedSubjects: 10,
    });
  });

  it("does not raise a limit to admit the one scraper it refuses when the share can refuse no one", async () => {
    // 100 clients at 1 a minute for 12 minutes and one scraper at 30 a minute: 0.1% of 101
    // subjects is none, so what fits is the scraper's peak; raising 5 to 30 is not suggested.
    const subjects: [number, number][] = [
      ...Array.from({ length: 100 }, (): [number, number] => [1, 12]),
      [30, 12],
    ];
    const scraped = await tuned(subjects, 0.001);
    expect(scraped).toMatchObject({ fits: 30, suggestedLimit: null, subjectWindows: 1212 });
    expect(scraped?.withheld).toMatch(
      /refuses none: a higher limit would admit the heaviest subject \(peak 30\)/,
    );
  });
});
