/**
 * The CI scenario's report, compared with the committed expectation byte for byte. When this
 * fails after a deliberate change, run `npm run simulate:expect` and review the diff: every
 * changed figure must be explained in the commit.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { simulate } from "../../src/simulate/run.js";
import { fixtureScenario } from "./helpers.js";

describe("the CI scenario", () => {
  it("reports exactly what test/simulate/expected/ci.json says", async () => {
    const report = await simulate(fixtureScenario("ci.yaml"));
    const expected = readFileSync("test/simulate/expected/ci.json", "utf8");
    expect(`${JSON.stringify(report, null, 2)}\n`).toBe(expected);
  }, 60_000);
});
