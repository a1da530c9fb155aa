import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { EdgelimitError } from "../../src/core/errors.js";
import { loadRlsConfig } from "../../src/rls/config-files.js";
import { cliEntry } from "../support/cli-entry.js";
import { cleanEnv } from "./harness.js";

/**
 * Loading envoyproxy/ratelimit's configuration: what it refuses is refused here with the file,
 * the line and the same problem (one fixture of our own for each of its invalid-config cases),
 * every problem of a load at once; what it accepts loads.
 */

const root = mkdtempSync(join(tmpdir(), "edgelimit-rls-config-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let written = 0;
const DEFAULTS = { mergeDomains: false, globalShadow: false };

/** Writes `files` (name -> YAML) into a fresh directory; returns its path. */
function directory(files: Record<string, string>): string {
  const dir = join(root, `case-${written++}`);
  mkdirSync(dir);
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}

function problemsOf(
  files: Record<string, string>,
  options = DEFAULTS,
): { file: string | undefined; line: number | undefined; message: string }[] {
  const dir = directory(files);
  try {
    loadRlsConfig(dir, options);
  } catch (error) {
    expect(error).toBeInstanceOf(EdgelimitError);
    expect((error as EdgelimitError).code).toBe("EL_RLS_CONFIG");
    return (error as EdgelimitError).issues.map((issue) => ({
      file: issue.file?.slice(dir.length + 1),
      line: issue.line,
      message: issue.message,
    }));
  }
  throw new Error("the configuration loaded");
}

describe("envoyproxy/ratelimit's invalid configurations", () => {
  it.each([
    {
      case: "a unit it does not know",
      yaml: "domain: shop\ndescriptors:\n  - key: client\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 5\n",
      line: 5,
      message: "invalid rate limit unit 'fortnight'",
    },
    {
      case: "YAML it cannot parse",
      yaml: "domain: shop\ndescriptors: [\n",
      line: 3,
      message: "error loading config file:",
    },
    {
      case: "a descriptor twice at one level",
      yaml: "domain: shop\ndescriptors:\n  - key: client\n    value: acme\n  - key: client\n    value: acme\n",
      line: 5,
      message: "duplicate descriptor composite key 'shop.client_acme'",
    },
    {
      case: "no domain",
      yaml: "descriptors:\n  - key: client\n",
      line: 1,
      message: "config file cannot have empty domain",
    },
    {
      case: "a descriptor without a key",
      yaml: "domain: shop\ndescriptors:\n  - value: acme\n",
      line: 3,
      message: "descriptor has empty key",
    },
    {
      case: "a misspelt key",
      yaml: "domain: shop\ndescriptors:\n  - key: client\n    ratelimit:\n      unit: day\n      requests_per_unit: 5\n",
      line: 4,
      message: "config error, unknown key 'ratelimit'",
    },
    {
      case: "a misspelt key under rate_limit",
      yaml: "domain: shop\ndescriptors:\n  - key: client\n    rate_limit:\n      unit: day\n      requestsperunit: 5\n",
      line: 6,
      message: "config error, unknown key 'requestsperunit'",
    },
    {
      case: "a list of something other than maps",
      yaml: "domain: shop\ndescriptors:\n  - alpha\n",
      line: 3,
      message: "config error, yaml file contains list of type other than map: alpha",
    },
    {
      case: "a key that is not a string",
      yaml: "0.5: shop\ndescriptors:\n  - key: client\n",
      line: 1,
      message: "config error, key is not of type string: 0.5",
    },
    {
      case: "an empty replaces entry",
      yaml: "domain: shop\ndescriptors:\n  - key: client\n    rate_limit:\n      name: mine\n      unit: second\n      requests_per_unit: 5\n      replaces:\n        - name:\n",
      line: 9,
      message: "should not have an empty replaces entry",
    },
    {
      case: "a limit that replaces itself",
      yaml: "domain: shop\ndescriptors:\n  - key: client\n    rate_limit:\n      name: mine\n      unit: second\n      requests_per_unit: 5\n      replaces:\n        - name: mine\n",
      line: 9,
      message: "replaces should not contain name of same descriptor",
    },
    {
      case: "unlimited with a unit",
      yaml: "domain: shop\ndescriptors:\n  - key: client\n    rate_limit:\n      unlimited: true\n      unit: day\n      requests_per_unit: 25\n",
      line: 6,
      message: "should not specify rate limit unit when unlimited",
    },
    {
      case: "share_threshold without a wildcard",
      yaml: "domain: shop\ndescriptors:\n  - key: client\n    value: acme\n    share_threshold: true\n    rate_limit:\n      unit: day\n      requests_per_unit: 25\n",
      line: 3,
      message:
        "share_threshold can only be used with wildcard values (containing '*'), but found key 'client_acme'",
    },
    {
      case: "a number of requests that is not one",
      yaml: "domain: shop\ndescriptors:\n  - key: client\n    rate_limit:\n      unit: day\n      requests_per_unit: lots\n",
      line: 6,
      message: "must be a whole number from 0 to 4294967295, not lots",
    },
    {
      case: "an unquoted decimal where a string is expected",
      yaml: "domain: shop\ndescriptors:\n  - key: version\n    value: 1.5\n    rate_limit: { unit: day, requests_per_unit: 5 }\n",
      line: 4,
      message:
        "config error, 1.5 is a decimal number (YAML reads it as a float), which envoyproxy/ratelimit refuses anywhere in its configuration: quote it ('\"1.5\"')",
    },
    {
      case: "a decimal where a whole number is expected, even a whole one",
      yaml: "domain: shop\ndescriptors:\n  - key: client\n    rate_limit:\n      unit: day\n      requests_per_unit: 5.0\n",
      line: 6,
      message: "config error, 5.0 is a decimal number",
    },
    {
      case: "a number its reader types as a float (08 is not octal)",
      yaml: "domain: shop\ndescriptors:\n  - key: code\n    value: 08\n",
      line: 4,
      message: "config error, 08 is a decimal number",
    },
    {
      case: "an integer beyond int64",
      yaml: "domain: shop\ndescriptors:\n  - key: account\n    value: 9223372036854775808\n",
      line: 4,
      message: "config error, 9223372036854775808 is a number beyond 64-bit integers",
    },
    {
      case: "a key written twice in one mapping",
      yaml: "domain: shop\ndescriptors:\n  - key: client\n    rate_limit:\n      unit: minute\n      requests_per_unit: 5\n      requests_per_unit: 10\n",
      line: 7,
      message:
        "config error, key 'requests_per_unit' is written twice in one mapping (first on line 6)",
    },
    {
      case: "a key written twice in a descriptor's metadata",
      yaml: "domain: shop\ndescriptors:\n  - key: client\n    metadata:\n      team: search\n      team: ads\n",
      line: 6,
      message: "config error, key 'team' is written twice in one mapping (first on line 5)",
    },
  ])("refuses $case, with the file and the line", ({ yaml, line, message }) => {
    const problems = problemsOf({ "config.yaml": yaml });
    expect(problems).toHaveLength(1);
    expect(problems[0]?.file).toBe("config.yaml");
    expect(problems[0]?.line).toBe(line);
    expect(problems[0]?.message).toContain(message);
  });

  it("refuses a domain twice, in the file that repeats it", () => {
    const problems = problemsOf({
      "a.yaml": "domain: shop\ndescriptors:\n  - key: client\n",
      "b.yaml": "\ndomain: shop\ndescriptors:\n  - key: other\n",
    });
    expect(problems).toEqual([
      {
        file: "b.yaml",
        line: 2,
        message: expect.stringContaining("duplicate domain 'shop' in config file"),
      },
    ]);
  });

  it("merges one domain's files with MERGE_DOMAIN_CONFIG, and still refuses a descriptor twice", () => {
    const dir = directory({
      "a.yaml":
        "domain: shop\ndescriptors:\n  - key: client\n    rate_limit: { unit: day, requests_per_unit: 1 }\n",
      "b.yaml":
        "domain: shop\ndescriptors:\n  - key: other\n    rate_limit: { unit: day, requests_per_unit: 2 }\n",
    });
    const merged = loadRlsConfig(dir, { ...DEFAULTS, mergeDomains: true });
    expect([...(merged.config.domains.get("shop")?.children.keys() ?? [])]).toEqual([
      "client",
      "other",
    ]);
    const twice = problemsOf(
      {
        "a.yaml": "domain: shop\ndescriptors:\n  - key: client\n",
        "b.yaml": "domain: shop\ndescriptors:\n  - key: client\n",
      },
      { ...DEFAULTS, mergeDomains: true },
    );
    expect(twice).toEqual([
      { file: "b.yaml", line: 3, message: "duplicate descriptor composite key 'shop.client'" },
    ]);
  });

  it("reports every problem of every file at once", () => {
    const problems = problemsOf({
      "a.yaml":
        "domain: one\ndescriptors:\n  - key: x\n    rate_limit: { unit: eon, requests_per_unit: 1 }\n",
      "b.yaml": "domain: two\ndescriptors:\n  - key: y\n    ratelimt: {}\n",
    });
    expect(problems.map((problem) => `${problem.file}:${problem.line}`)).toEqual([
      "b.yaml:4",
      "a.yaml:4",
    ]);
  });

  it("checks the edgelimit block of a descriptor's metadata with the policy's own rules", () => {
    const problems = problemsOf({
      "config.yaml": [
        "domain: shop",
        "descriptors:",
        "  - key: a",
        "    rate_limit: { unit: minute, requests_per_unit: 1 }",
        "    metadata:",
        "      edgelimit: { algorithm: leaky-bucket }",
        "  - key: b",
        "    rate_limit: { unit: minute, requests_per_unit: 1 }",
        "    metadata:",
        "      edgelimit: { window: 1mo, algorithm: sliding-window }",
        "  - key: c",
        "    rate_limit: { unit: minute, requests_per_unit: 1 }",
        "    metadata:",
        "      edgelimit: { limits: [{ limit: 5, window: 1m }] }",
        "",
      ].join("\n"),
    });
    expect(problems.map((problem) => [problem.line, problem.message])).toEqual([
      [6, expect.stringContaining("fixed-window")],
      [10, expect.stringContaining("a window in calendar months needs algorithm fixed-window")],
      [14, expect.stringContaining("two limits of this descriptor count in the same window")],
    ]);
  });

  it("takes counting: exact or hybrid in the edgelimit block, and no hybrid token bucket", () => {
    const problems = problemsOf({
      "config.yaml": [
        "domain: shop",
        "descriptors:",
        "  - key: a",
        "    rate_limit: { unit: minute, requests_per_unit: 1 }",
        "    metadata:",
        "      edgelimit: { counting: approximate }",
        "  - key: b",
        "    rate_limit: { unit: minute, requests_per_unit: 1 }",
        "    metadata:",
        "      edgelimit: { counting: hybrid, algorithm: token-bucket }",
        "  - key: c",
        "    rate_limit: { unit: minute, requests_per_unit: 1 }",
        "    metadata:",
        "      edgelimit:",
        "        counting: hybrid",
        "        limits: [{ limit: 5, window: 1h, algorithm: token-bucket }]",
        "",
      ].join("\n"),
    });
    expect(problems.map((problem) => [problem.line, problem.message])).toEqual([
      [6, expect.stringMatching(/"exact".*"hybrid"/)],
      [10, expect.stringContaining("counting: hybrid needs a windowed algorithm")],
      [14, expect.stringContaining("counting: hybrid needs a windowed algorithm")],
    ]);
    const dir = directory({
      "config.yaml": [
        "domain: shop",
        "descriptors:",
        "  - key: a",
        "    rate_limit: { unit: minute, requests_per_unit: 1 }",
        "    metadata:",
        "      edgelimit: { counting: hybrid, limits: [{ limit: 5, window: 1h }] }",
        "  - key: b",
        "    rate_limit: { unit: minute, requests_per_unit: 1 }",
        "",
      ].join("\n"),
    });
    const [hybrid, exact] = loadRlsConfig(dir, DEFAULTS).config.limits;
    expect(hybrid?.rules.map((rule) => rule.counting)).toEqual(["hybrid", "hybrid"]);
    expect(exact?.rules.map((rule) => rule.counting)).toEqual(["exact"]);
  });
});

describe("what loads", () => {
  it("reads a directory below it in name order, skipping names that start with a dot", () => {
    const dir = directory({ "b.yaml": "domain: second\n", "a.yaml": "domain: first\n" });
    // A ConfigMap volume: the previous copy under ..data and a timestamped directory.
    mkdirSync(join(dir, "..2025_01_01"));
    writeFileSync(join(dir, "..2025_01_01", "a.yaml"), "domain: first\n");
    symlinkSync("..2025_01_01", join(dir, "..data"));
    mkdirSync(join(dir, "more"));
    writeFileSync(join(dir, "more", "c.yaml"), "domain: third\n");
    const loaded = loadRlsConfig(dir, DEFAULTS);
    expect([...loaded.config.domains.keys()]).toEqual(["first", "second", "third"]);
  });

  it("loads keys envoyproxy/ratelimit ignores where they stand, and warns about them", () => {
    const dir = directory({
      "config.yaml": "domain: shop\ndescriptors:\n  - key: client\n    unit: minute\n",
    });
    const loaded = loadRlsConfig(dir, DEFAULTS);
    expect(loaded.warnings.map((warning) => [warning.line, warning.message])).toEqual([
      [4, expect.stringContaining("'unit' has no effect in a descriptor")],
    ]);
  });

  it("takes as text the numbers envoyproxy/ratelimit takes: integers in Go's syntax, quoted decimals", () => {
    const values = ["0x1F", "0o17", "1_000", "012", "9223372036854775807", "'1.5'", "2001-12-14"];
    const dir = directory({
      "config.yaml": `domain: shop\ndescriptors:\n${values.map((value) => `  - key: v\n    value: ${value}\n`).join("")}`,
    });
    const children = loadRlsConfig(dir, DEFAULTS).config.domains.get("shop")?.children;
    expect([...(children?.keys() ?? [])]).toEqual(
      ["0x1F", "0o17", "1_000", "012", "9223372036854775807", "1.5", "2001-12-14"].map(
        (value) => `v_${value}`,
      ),
    );
  });

  it("reads values as written and YAML 1.1 as envoyproxy/ratelimit's parser does", () => {
    const dir = directory({
      "config.yaml":
        "domain: shop\ndescriptors:\n  - key: code\n    value: 0012\n    shadow_mode: yes\n    rate_limit: { unit: MINUTE, requests_per_unit: 010 }\n",
    });
    const node = loadRlsConfig(dir, DEFAULTS).config.domains.get("shop")?.children.get("code_0012");
    expect(node?.limit).toMatchObject({ requestsPerUnit: 8, shadowMode: true, unit: 2 });
  });
});

describe("edgelimit rls --config (the real CLI)", () => {
  it("exits 1 naming the file, the line and the problem", async () => {
    const dir = directory({
      "config.yaml":
        "domain: shop\ndescriptors:\n  - key: client\n    rate_limit: { unit: fortnight, requests_per_unit: 5 }\n",
    });
    const result = await promisify(execFile)(
      process.execPath,
      [...cliEntry(), "rls", "--config", dir, "--grpc-port", "0", "--http-port", "0"],
      { env: cleanEnv() },
    ).catch((error: { code: number; stderr: string }) => error);
    expect((result as { code: number }).code).toBe(1);
    expect((result as { stderr: string }).stderr).toContain(
      `${join(dir, "config.yaml")}, line 4: descriptors[0].rate_limit.unit: invalid rate limit unit 'fortnight'`,
    );
  });
});
