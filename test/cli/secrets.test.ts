import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { closedPort } from "../gateway/helpers.js";
import { cliEntry } from "../support/cli-entry.js";

/**
 * `edgelimit rls` and `edgelimit serve` with the seed policy on a machine where none of its
 * secrets is set: one run names every variable to set (the seed reads two), in the real CLI.
 */

/** The environment without any of edgelimit's variables, as on a fresh machine. */
function freshEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (!name.startsWith("EDGELIMIT_")) env[name] = value;
  }
  return env;
}

function cli(args: string[]): { code: number | null; stderr: string } {
  const result = spawnSync(process.execPath, [...cliEntry(), ...args], {
    encoding: "utf8",
    env: freshEnv(),
    timeout: 60_000,
  });
  return { code: result.status, stderr: result.stderr };
}

const SEED = "examples/policies/cloudfront.yaml";

describe("a policy whose secrets are not set", () => {
  it("stops edgelimit rls once, naming both of the seed's variables and their fields", () => {
    const { code, stderr } = cli([
      "rls",
      "--policy",
      SEED,
      ...["--host", "127.0.0.1", "--grpc-port", "0", "--http-port", "0", "--admin-port", "0"],
    ]);
    expect(code).toBe(1);
    expect(stderr).toContain("(EL_POLICY_SECRET_MISSING)");
    expect(stderr).toContain("export EDGELIMIT_JWT_SECRET=... EDGELIMIT_CHALLENGE_SECRET=...");
    expect(stderr).toMatch(
      /identity\.user\.jwt\.secret: environment variable EDGELIMIT_JWT_SECRET/,
    );
    expect(stderr).toMatch(/challenge\.secret: environment variable EDGELIMIT_CHALLENGE_SECRET/);
  }, 60_000);

  it("stops edgelimit serve the same way", async () => {
    const { code, stderr } = cli([
      "serve",
      "--policy",
      SEED,
      "--upstream",
      "http://127.0.0.1:9",
      ...["--host", "127.0.0.1", "--port", String(await closedPort()), "--admin-port", "0"],
    ]);
    expect(code).toBe(1);
    expect(stderr).toContain("EDGELIMIT_JWT_SECRET");
    expect(stderr).toContain("EDGELIMIT_CHALLENGE_SECRET");
  }, 60_000);
});
