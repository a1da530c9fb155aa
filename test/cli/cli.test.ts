import { execFile, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { TEST_SECRET } from "../gateway/helpers.js";
import { cliEntry } from "../support/cli-entry.js";
import { type StartedServe, startServe } from "../support/serve-process.js";

/** The real CLI in a child process, as the other CLI tests run it (../support/cli-entry.ts). */
function cli(
  args: string[],
  env: Record<string, string | undefined> = {},
): { code: number | null; stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, [...cliEntry(), ...args], {
    encoding: "utf8",
    env: { ...process.env, ...env },
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** `cli`'s output, from a child process that does not block this one: for several at once. */
function cliOutput(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [...cliEntry(), ...args], (error, stdout) =>
      error === null ? resolve(stdout) : reject(error),
    );
  });
}

const dir = mkdtempSync(join(tmpdir(), "edgelimit-cli-"));
function policyFile(yaml: string): string {
  const file = join(dir, `policy-${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(file, yaml);
  return file;
}

const COMMANDS = ["check", "serve", "build", "replay", "override"] as const;

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("edgelimit --help", () => {
  it.each(["check", "serve", "build", "build lambda-edge", "replay"])(
    "%s --help prints its usage and exits 0",
    (command) => {
      const { code, stdout, stderr } = cli([...command.split(" "), "--help"]);
      expect(stderr).toBe("");
      expect(code).toBe(0);
      expect(stdout).toMatch(new RegExp(`^Usage: edgelimit ${command.split(" ")[0]}`));
    },
  );

  it("an unknown option is a usage error (exit 2), not a stack trace", () => {
    const { code, stderr } = cli(["check", "--bogus"]);
    expect(code).toBe(2);
    expect(stderr).toContain("Unknown option '--bogus'");
    expect(stderr).toContain("Usage: edgelimit check");
  });

  it("lists every command, every option each command parses, and the environment the CLI reads", async () => {
    // The six processes at once: each is mostly Node starting up, one core's work.
    const [stdout = "", ...usages] = await Promise.all([
      cliOutput(["--help"]),
      ...COMMANDS.map((command) => cliOutput([command, "--help"])),
    ]);
    for (const [index, command] of COMMANDS.entries()) {
      expect(stdout).toContain(`Usage: edgelimit ${command}`);
      // Every option the command's parseArgs accepts, read from its source.
      const source = readFileSync(`src/cli/${command}.ts`, "utf8");
      const options = [
        ...source.matchAll(/^\s+"?([a-z][a-z-]*)"?: \{ type: "(?:string|boolean)"/gm),
      ];
      expect(options.length).toBeGreaterThan(1);
      for (const [, option] of options) expect(stdout).toContain(`--${option}`);
      for (const line of usages[index]?.match(/--[a-z-]+/g) ?? []) {
        expect(stdout).toContain(line);
      }
    }
    for (const option of ["--host", "--no-limit", "--log-sample", "--admin-host"]) {
      expect(stdout).toContain(option);
    }
    // Every variable the CLI and the stores it builds read by name.
    const sources = ["src/cli/build.ts", "src/cli/serve.ts", "src/stores/dynamodb/client.ts"];
    sources.push("src/lists/sources.ts");
    const names = new Set(
      sources.flatMap((file) =>
        [...readFileSync(file, "utf8").matchAll(/env\.([A-Z][A-Z0-9_]+)/g)].map((m) => m[1]),
      ),
    );
    expect(names.size).toBeGreaterThan(2);
    for (const name of names) expect(stdout).toContain(name as string);
    expect(stdout).toContain("{ env: NAME }");
  });
});

describe("edgelimit check", () => {
  it("--json prints the errors as one object with code, path, line and message, and exits 1", () => {
    const file = policyFile("tiers:\n  anonymous:\n    global: { limt: 60 }\n    window: 1M\n");
    const { code, stdout } = cli(["check", "--json", file]);
    expect(code).toBe(1);
    const report = JSON.parse(stdout) as { ok: boolean; issues: Record<string, unknown>[] };
    expect(report.ok).toBe(false);
    expect(report.issues).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          code: "EL_POLICY_UNKNOWN_FIELD",
          path: "tiers.anonymous.global.limt",
          line: 3,
        }),
        expect.objectContaining({
          code: "EL_POLICY_BAD_WINDOW",
          path: "tiers.anonymous.window",
          line: 4,
          message: '"1M" is ambiguous: write 1m for a minute or 1mo for a month',
        }),
      ]),
    );
  });

  it("gives a YAML syntax error's line and column, in text and in --json", () => {
    const file = policyFile("tiers:\n  anonymous:\n    global: { limit: 5 }\n  a: b: c\n");
    const text = cli(["check", file]);
    expect(text.code).toBe(1);
    expect(text.stderr).toMatch(/line 4, column 6: Nested mappings/);
    const json = cli(["check", "--json", file]);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout).issues[0]).toMatchObject({
      code: "EL_POLICY_PARSE",
      path: "",
      line: 4,
      column: 6,
    });
  });

  it("warns when a secret the policy reads from the environment is unset, and passes", () => {
    const yaml = [
      "identity:",
      "  user:",
      "    jwt: { algorithms: [HS256], secret: { env: EDGELIMIT_TEST_UNSET_SECRET } }",
      "tiers: { anonymous: { global: 5 }, authenticated: { global: 5 } }",
    ].join("\n");
    const file = policyFile(yaml);
    const unset = cli(["check", file], { EDGELIMIT_TEST_UNSET_SECRET: undefined });
    expect(unset.code).toBe(0);
    expect(unset.stderr).toContain(
      "warning: identity.user.jwt.secret reads the environment variable EDGELIMIT_TEST_UNSET_SECRET, which is not set here",
    );
    const set = cli(["check", file], { EDGELIMIT_TEST_UNSET_SECRET: TEST_SECRET });
    expect(set.code).toBe(0);
    expect(set.stderr).toBe("");
  });
});

describe("edgelimit serve --admin-host", () => {
  let served: StartedServe | undefined;
  afterAll(() => {
    served?.child.kill("SIGKILL");
  });

  it("listens where it is told, warning on stderr when that is not loopback", async () => {
    served = await startServe({
      policy: policyFile("tiers: { anonymous: { global: 5 } }\n"),
      args: ["--admin-host", "0.0.0.0", "--log-sample", "0"],
    });
    expect(served.output()).toContain(
      "warning: --admin-host 0.0.0.0 is not a loopback address: the dashboard, /metrics and /api/snapshot have no authentication",
    );
    const health = await fetch(`${served.admin}/healthz`);
    expect(health.status).toBe(200);
  }, 30_000);

  it("refuses an admin port equal to the public port", () => {
    const file = policyFile("tiers: { anonymous: { global: 5 } }\n");
    const result = cli(
      ["serve", "--policy", file, "--upstream", "http://127.0.0.1:1"].concat([
        "--port",
        "18080",
        "--admin-port",
        "18080",
      ]),
    );
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("--admin-port 18080 is the public port");
  });
});
