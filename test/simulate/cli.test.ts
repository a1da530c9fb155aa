import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { cliEntry } from "../support/cli-entry.js";
import { onTerminal } from "../support/terminal.js";

const run = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), "edgelimit-simulate-cli-"));
const CI = resolve("test/simulate/fixtures/ci.yaml");

afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function edgelimit(
  ...args: string[]
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [...cliEntry(), "simulate", ...args]);
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

describe("edgelimit simulate (the command)", () => {
  it("prints the modes side by side, and with --json the report the expectation file holds", async () => {
    const text = await edgelimit(CI);
    expect(text.code).toBe(0);
    // Not a terminal: no progress line.
    expect(text.stderr).toBe("");
    // On a global table, `exact` counts each region's items: it is named by what it does.
    expect(text.stdout).toMatch(/^\s+two-writes\s+per-region\s+hybrid$/m);
    expect(text.stdout).toContain("lost increments");
    // Legitimate latency in each region: a wait in the region far from the lease shows there.
    expect(text.stdout).toMatch(/^\s+in eu-west-1\s+[\d.]+ \/ [\d.]+\s+[\d.]+ \/ [\d.]+/m);
    expect(text.stdout).toMatch(/^\s+in us-east-1\s/m);
    // Hybrid's far region waits for the lease region, and the report says why.
    expect(text.stdout).toContain("waited beyond the region's store");
    expect(text.stdout).toMatch(/^\s+in eu-west-1\s+\d+ of \d+ \(\d+ \/ \d+ \/ \d+ \/ \d+\)/m);
    const json = await edgelimit(CI, "--json");
    expect(json.stdout).toBe(readFileSync("test/simulate/expected/ci.json", "utf8"));
  }, 60_000);

  it("takes --seed and writes --html", async () => {
    const page = join(dir, "report.html");
    const result = await edgelimit(CI, "--seed", "9", "--html", page);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("(seed 9)");
    expect(readFileSync(page, "utf8")).toContain("edgelimitChart(chart.target, chart.spec)");
  }, 60_000);

  it("shows its progress on a terminal, on stderr, and clears it before the report", () => {
    // The CI scenario over 3 minutes: long enough, on a quiet machine too, for the first line,
    // which comes half a second after the start.
    const longer = join(dir, "longer.yaml");
    writeFileSync(
      longer,
      readFileSync(CI, "utf8")
        .replace("duration: 90s", "duration: 3m")
        .replace("policy: ../../../", `policy: ${resolve(".")}/`),
    );
    const command = [process.execPath, ...cliEntry(), "simulate", longer];
    const { code, output } = onTerminal(command);
    expect(code).toBe(0);
    // At most twice a second: how many lines appear depends on the machine's pace.
    expect(output).toMatch(
      /\rsimulating (two-writes|exact|hybrid) \(mode [123] of 3\): \d+:\d\d of 3:30 simulated, ETA \d+ s/,
    );
    expect(output).toContain("\r\u001b[Kedgelimit simulate: ci (seed 7)");
    expect(onTerminal([...command, "--no-progress"]).output).not.toContain("simulating");
  }, 120_000);

  it("exits 2 with a clear message on bad input", async () => {
    const bad = join(dir, "bad.yaml");
    writeFileSync(
      bad,
      "duration: 10m\npolicy: x.yaml\nregions: { us-east-1: {} }\nstore: { kind: dynamo }\n",
    );
    const huge = join(dir, "huge.yaml");
    writeFileSync(
      huge,
      readFileSync(CI, "utf8")
        .replace("- clients: 40", "- clients: 200000000")
        .replace("policy: ../../../examples", `policy: ${resolve("examples")}`),
    );
    // The seven at once: each is mostly Node starting up, one core's work.
    const [invalid, none, badSeed, tooLarge, redis, badModes, missing] = await Promise.all([
      edgelimit(bad),
      edgelimit(),
      edgelimit(CI, "--seed", "x"),
      edgelimit(huge),
      // --modes replaces the scenario's and is checked as the file's would be.
      edgelimit(
        resolve("examples/scenarios/redis-gateway.yaml"),
        "--modes",
        "hybrid,hybrid+holder",
      ),
      edgelimit(CI, "--modes", "fast"),
      edgelimit(join(dir, "none.yaml")),
    ]);
    expect(invalid.code).toBe(2);
    expect(invalid.stderr).toContain("store.kind");
    expect(invalid.stderr).toContain("deployment");
    expect(none.code).toBe(2);
    expect(badSeed.stderr).toContain("--seed x: expected a whole number");
    expect(tooLarge.code).toBe(2);
    expect(tooLarge.stderr).toContain(
      'huge.yaml is too large to simulate (docs/accuracy.md, "Limits of the model"):\n  traffic.legitimate: 200,000,010 clients in all',
    );
    expect(redis.code).toBe(2);
    expect(redis.stderr).toContain('modes: "hybrid+holder" holds reservations in DynamoDB items');
    expect(badModes.stderr).toContain("modes");
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("cannot read");
  }, 60_000);
});
