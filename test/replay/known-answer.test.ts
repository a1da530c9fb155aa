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
    // At most 0.1% of 3 subjects is none: the limit that fits is the highest peak.
    expect(rule("fixed")?.suggestion).toMatchObject({ suggestedLimit: 12, refusedSubjects: 0 });
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
});
