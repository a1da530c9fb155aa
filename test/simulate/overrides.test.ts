/**
 * `edgelimit simulate --overrides FILE`: operators' overrides in force from the start on every
 * simulated instance and in the reference, so a scenario answers what the traffic would meet
 * with them.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { simulate } from "../../src/simulate/run.js";
import { loadScenario } from "../../src/simulate/scenario.js";
import { cliEntry } from "../support/cli-entry.js";

const run = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), "edgelimit-simulate-overrides-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const CI = resolve("test/simulate/fixtures/ci.yaml");
/** The CI scenario's spread attacker (simulate/traffic.ts: attacker 0). */
const ATTACKER = "ip:203.0.113.7";

describe("simulate --overrides", () => {
  it("holds the overrides on every instance and in the reference", async () => {
    const scenario = loadScenario(CI, ["exact"]);
    const [plain] = (await simulate(scenario)).modes;
    const [allowed] = (
      await simulate(scenario, {
        overrides: [{ subject: ATTACKER, allow: true, note: "load test" }],
        overridesFile: "allow.yaml",
      })
    ).modes;
    // Without: per-region exact counting admits the attacker a little over its limit.
    expect(plain?.attackers.admitted).toBeLessThan(plain?.attackers.requests ?? 0);
    expect(plain?.overAdmission.requests).toBeGreaterThan(0);
    // Allowed through: every one of its requests, and nothing is "beyond the limit" since the
    // reference allows it too; its requests are not counted in the store.
    expect(allowed?.attackers.admitted).toBe(allowed?.attackers.requests);
    expect(allowed?.overAdmission.requests).toBe(0);
    expect(allowed?.store.operations).toBeLessThan(plain?.store.operations ?? 0);
    // The legitimate clients meet the same limits either way.
    expect(allowed?.legitimate).toEqual(plain?.legitimate);
  });

  it("refuses an override the policy does not allow, naming the file and the entry (exit 2)", async () => {
    const file = join(dir, "bad.yaml");
    writeFileSync(file, `- { subject: "${ATTACKER}", rule: nope, limit: 5 }\n`);
    const failed = await run(process.execPath, [
      ...cliEntry(),
      "simulate",
      CI,
      "--modes",
      "exact",
      "--no-progress",
      "--overrides",
      file,
    ]).then(
      () => ({ code: 0, stderr: "" }),
      (error: { code: number; stderr: string }) => error,
    );
    expect(failed.code).toBe(2);
    expect(failed.stderr).toMatch(
      /--overrides .*bad\.yaml: entry 1: the policy has no rule "nope"/,
    );
    expect(failed.stderr).toContain("EL_OVERRIDE_RULE");
  }, 30_000);
});
