/**
 * `edgelimit replay --overrides FILE`: operators' overrides in force over a replayed log, checked
 * against the policy as a store checks them, their `until` read on the log's own clock.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { replayLogs } from "../../src/replay/replay.js";
import { cliEntry } from "../support/cli-entry.js";
import { combinedLine, fixture, T0 } from "./helpers.js";

const dir = mkdtempSync(join(tmpdir(), "edgelimit-replay-overrides-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function write(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

/** Five clients on /fixed (5 per minute) over three minutes, one request every 2 s each. */
const lines: string[] = [];
for (let second = 0; second < 180; second += 2) {
  for (let client = 1; client <= 5; client++) {
    lines.push(combinedLine(`198.51.100.${client}`, T0 + (second + client / 10) * 1000, "/fixed"));
  }
}
const log = write("five.log", `${lines.join("\n")}\n`);

async function allowedWith(overrides?: string): Promise<number | undefined> {
  const { report } = await replayLogs({
    policy: fixture("algorithms.yaml"),
    inputs: [log],
    overrides,
  });
  return report.rules.find((rule) => rule.id === "fixed")?.allowed;
}

describe("replay --overrides", () => {
  it("replays the log as it would have gone with the overrides in force", async () => {
    // Without: 5 a minute for each of 5 clients over 3 minutes.
    expect(await allowedWith()).toBe(75);
    // Client 1 raised to 30 a minute on the rule: all 90 of its requests; the others' 60.
    const raised = write(
      "raised.yaml",
      '- { subject: "ip:198.51.100.1", rule: fixed, limit: 30, note: "partner migration" }\n',
    );
    expect(await allowedWith(raised)).toBe(90 + 60);
    // Client 2 blocked: none of its requests; the others' 60.
    const blocked = write(
      "blocked.json",
      JSON.stringify({ overrides: [{ subject: "ip:198.51.100.2", block: "key leaked" }] }),
    );
    expect(await allowedWith(blocked)).toBe(60);
  });

  it("ends an override at its until, on the log's clock", async () => {
    // Raised for the first minute only: 30, then 5 and 5.
    const until = new Date(T0 + 60_000).toISOString();
    const file = write(
      "until.yaml",
      `- { subject: "ip:198.51.100.1", limit: 30, until: "${until}" }\n`,
    );
    expect(await allowedWith(file)).toBe(30 + 5 + 5 + 60);
  });

  it("refuses a file it cannot apply as written, naming the file, the entry and the code", () => {
    const cases: [string, string, RegExp][] = [
      [
        "rule.yaml",
        '- { subject: "ip:198.51.100.1", rule: nope, limit: 30 }\n',
        /entry 1: the policy has no rule "nope".*\(EL_OVERRIDE_RULE\)/,
      ],
      [
        "two.yaml",
        '- { subject: "ip:198.51.100.1", limit: 30 }\n- { subject: "ip:198.51.100.1" }\n',
        /entry 2: an override says exactly one of/,
      ],
      [
        "subject.yaml",
        '- { subject: "nobody", allow: true }\n',
        /entry 1: .*\(EL_OVERRIDE_SUBJECT\)/,
      ],
      ["shape.yaml", "subject: ip:198.51.100.1\n", /expected a list of overrides/],
    ];
    for (const [name, text, message] of cases) {
      const result = spawnSync(
        process.execPath,
        [
          ...cliEntry(),
          "replay",
          "--policy",
          fixture("algorithms.yaml"),
          "--overrides",
          write(name, text),
          "--no-progress",
          log,
        ],
        { encoding: "utf8" },
      );
      expect(result.status, name).toBe(1);
      expect(result.stderr, name).toMatch(message);
      expect(result.stderr, name).toContain(name);
    }
  }, 60_000);
});
