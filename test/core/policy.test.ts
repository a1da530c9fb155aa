import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { EdgelimitError } from "../../src/core/errors.js";
import { createRateLimit } from "../../src/core/rate-limit.js";
import { definePolicy, loadPolicy, parsePolicy } from "../../src/policy/load.js";
import { memoryStore } from "../../src/stores/memory.js";
import { cliEntry } from "../support/cli-entry.js";

const dir = mkdtempSync(join(tmpdir(), "edgelimit-policy-"));

function check(yaml: string): { code: number | null; stdout: string; stderr: string } {
  const file = join(dir, `policy-${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(file, yaml);
  const result = spawnSync(process.execPath, [...cliEntry(), "check", file], {
    encoding: "utf8",
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

function issuesOf(yaml: string): { path: string; line?: number; code: string; message: string }[] {
  try {
    parsePolicy(yaml, "test.yaml");
  } catch (error) {
    if (error instanceof EdgelimitError) return [...error.issues];
    throw error;
  }
  return [];
}

describe("policy validation", () => {
  it("accepts both example policies and resolves the seeds' rules", () => {
    const cloudfront = loadPolicy("examples/policies/cloudfront.yaml");
    const byId = new Map(cloudfront.rules.map((rule) => [rule.id, rule]));
    expect(byId.get("anonymous.global")).toMatchObject({
      limit: 60,
      action: "challenge",
      challengeBand: 2,
      window: { ms: 60_000 },
    });
    expect(byId.get("anonymous.path./api/reports")?.limit).toBe(5);
    expect(byId.get("anonymous.path./api/export")?.limit).toBe(3);
    expect(byId.get("anonymous.path./api/search")?.limit).toBe(30);
    expect(byId.get("authenticated.global")?.limit).toBe(300);
    expect(byId.get("authenticated.path./api/reports")?.limit).toBe(30);
    expect(byId.get("authenticated.path./api/export")?.limit).toBe(20);
    expect(byId.get("authenticated.path./api/search")?.limit).toBe(120);
    expect(byId.get("authenticated.plan.pro")?.limit).toBe(1000);
    expect(cloudfront.failClosedPaths).toEqual(["/api/admin/", "/api/billing/"]);
    // Store down: every rule counts locally; the two prefixes fail closed.
    expect(new Set(cloudfront.rules.map((rule) => rule.failMode))).toEqual(new Set(["local"]));
    const workers = loadPolicy("examples/policies/workers.yaml");
    expect(workers.rules.map((rule) => [rule.id, rule.limit, rule.key, rule.backend])).toEqual([
      ["login", 5, "ip", "approximate"],
      ["api.rate", 100, "user-or-ip", "approximate"],
      ["api.free-daily", 50, "user", "exact"],
    ]);
    expect(workers.rules[0]?.disclose).toBe(false);
    // The default fail mode, which workers.yaml does not set.
    expect(new Set(workers.rules.map((rule) => rule.failMode))).toEqual(new Set(["local"]));
  });

  it("names an unknown field, its line, and the fields allowed there", () => {
    const [issue] = issuesOf("tiers:\n  anonymous:\n    global: { limt: 60 }\n").filter(
      (i) => i.code === "EL_POLICY_UNKNOWN_FIELD",
    );
    expect(issue).toMatchObject({ path: "tiers.anonymous.global.limt", line: 3 });
    expect(issue?.message).toContain("allowed here: limit, window");
  });

  it("refuses a bad window, a negative limit and an unknown tier, naming each", () => {
    const issues = issuesOf(
      [
        "tiers:",
        "  anonymous:",
        "    window: 5 parsecs",
        "    paths:",
        "      /api/x: -1",
        "  premium:",
        "    global: 5",
      ].join("\n"),
    );
    expect(issues.map((issue) => [issue.path, issue.line, issue.code])).toEqual(
      expect.arrayContaining([
        ["tiers.anonymous.window", 3, "EL_POLICY_BAD_WINDOW"],
        ["tiers.anonymous.paths./api/x.limit", 5, "EL_POLICY_INVALID"],
        ["tiers.premium", 6, "EL_POLICY_UNKNOWN_TIER"],
      ]),
    );
  });

  it("refuses rules that cannot work: calendar months on a token bucket, users without identity", () => {
    expect(() =>
      definePolicy({ namespaces: { q: { limit: 5, window: "1mo", algorithm: "token-bucket" } } }),
    ).toThrow(/calendar months needs algorithm fixed-window/);
    expect(() => definePolicy({ tiers: { authenticated: { global: 5 } } })).toThrow(
      /needs identity.user/,
    );
    expect(() => definePolicy({ namespaces: { q: { limit: 5, key: "user" } } })).toThrow(
      /keyed by "user"/,
    );
  });

  it("refuses ambiguous durations with the spelling to use, at the field's path and line", () => {
    const issues = issuesOf(
      [
        "defaults:",
        "  window: 1M",
        "namespaces:",
        "  hourly: { limit: 5, window: 3600 }",
        "  daily: { limit: 5, window: 1 day }",
        "connectBudget: 2000",
        "challenge:",
        "  passTtl: 1mo",
      ].join("\n"),
    );
    const byPath = new Map(issues.map((issue) => [issue.path, issue]));
    expect(byPath.get("defaults.window")).toMatchObject({
      line: 2,
      code: "EL_POLICY_BAD_WINDOW",
      message: '"1M" is ambiguous: write 1m for a minute or 1mo for a month',
    });
    expect(byPath.get("namespaces.hourly.window")?.line).toBe(4);
    expect(byPath.get("namespaces.hourly.window")?.message).toContain('write "3600s" or "1h"');
    expect(byPath.get("namespaces.daily.window")?.message).toContain('write "1d"');
    expect(byPath.get("connectBudget")).toMatchObject({ line: 6, code: "EL_POLICY_INVALID" });
    expect(byPath.get("connectBudget")?.message).toContain('"2000s"');
    expect(byPath.get("challenge.passTtl")?.message).toContain("cannot be in calendar months");
  });

  it("accepts the documented forms: unit suffixes, and a bare budget in milliseconds", () => {
    const policy = parsePolicy(
      [
        "budget: 50",
        "connectBudget: 1500ms",
        "unavailableRetryAfter: 5s",
        "namespaces:",
        "  a: { limit: 5, window: 10s }",
        "  b: { limit: 5, window: 1m }",
        "  c: { limit: 5, window: 1h }",
        "  d: { limit: 5, window: 1w }",
        "  e: { limit: 5, window: 1mo }",
      ].join("\n"),
    );
    expect(policy.budgetMs).toBe(50);
    expect(policy.connectBudgetMs).toBe(1500);
    expect(policy.rules.map((rule) => rule.window)).toEqual([
      { ms: 10_000 },
      { ms: 60_000 },
      { ms: 3_600_000 },
      { ms: 604_800_000 },
      { months: 1 },
    ]);
    expect(() =>
      createRateLimit({ store: memoryStore(), limit: 5, window: 60_000 as unknown as string }),
    ).toThrow(/window a bare number is ambiguous here.*"60000ms" for milliseconds/);
  });

  it("refuses a budget or connect budget over a minute, which no request could wait for (a timer past 2^31 ms fires at once)", () => {
    const issues = issuesOf(
      ["namespaces:", "  a: { limit: 5 }", "budget: 30d", "connectBudget: 2m"].join("\n"),
    );
    const byPath = new Map(issues.map((issue) => [issue.path, issue]));
    expect(byPath.get("budget")).toMatchObject({
      line: 3,
      message: expect.stringContaining('must be at most 1m; got "30d"'),
    });
    expect(byPath.get("connectBudget")?.message).toContain('must be at most 1m; got "2m"');
    expect(issuesOf("namespaces:\n  a: { limit: 5 }\nbudget: 3000000000\n")[0]?.message).toContain(
      "must be at most 1m; got 3000000000",
    );
    expect(
      issuesOf("namespaces:\n  a: { limit: 5 }\nbudget: 60s\nconnectBudget: 60000ms\n"),
    ).toEqual([]);
  });

  it("refuses a window longer than a year, and a duration past exact milliseconds, naming the field", () => {
    const issues = issuesOf(
      [
        "namespaces:",
        "  huge: { limit: 5, window: 100000000000000000000s }",
        "  days: { limit: 5, window: 99999999999d }",
        "  weeks: { limit: 5, window: 53w }",
        "  months: { limit: 5, window: 13mo }",
        "  year: { limit: 5, window: 366d }",
        "  calendar: { limit: 5, window: 12mo }",
        "budget: 100000000000000000000s",
      ].join("\n"),
    );
    const byPath = new Map(issues.map((issue) => [issue.path, issue]));
    for (const [name, line] of [
      ["huge", 2],
      ["days", 3],
      ["weeks", 4],
      ["months", 5],
    ] as const) {
      expect(byPath.get(`namespaces.${name}.window`)).toMatchObject({
        line,
        code: "EL_POLICY_BAD_WINDOW",
        message: expect.stringContaining('must be at most a year: "366d" (or "52w"), or "12mo"'),
      });
    }
    expect(byPath.has("namespaces.year.window")).toBe(false);
    expect(byPath.has("namespaces.calendar.window")).toBe(false);
    expect(byPath.get("budget")?.message).toContain("too long to count in milliseconds");
    expect(() =>
      createRateLimit({ store: memoryStore(), limit: 5, window: "99999999999d" }),
    ).toThrow(/window must be at most a year/);
    const result = check("version: 1\nnamespaces:\n  q: { limit: 5, window: 99999999999d }\n");
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("line 3: namespaces.q.window: must be at most a year");
  });

  it("reports YAML syntax errors with their line", () => {
    const [issue] = issuesOf("tiers:\n  anonymous: [\n");
    expect(issue?.code).toBe("EL_POLICY_PARSE");
    expect(issue?.line).toBeGreaterThan(0);
  });

  it("refuses a key written twice in one mapping, naming the field and both lines", () => {
    const issues = issuesOf(
      [
        "version: 1",
        "tiers:",
        "  anonymous:",
        "    global: { limit: 60, window: 1m }",
        "    paths:",
        "      /api/export: { limit: 3, window: 1m, limit: 30 }",
        "    global: { limit: 600, window: 1m }",
        "",
      ].join("\n"),
    );
    expect(issues).toEqual([
      {
        path: "tiers.anonymous.paths./api/export.limit",
        line: 6,
        code: "EL_POLICY_PARSE",
        message: "written twice in one mapping (first on line 6); keep one",
      },
      {
        path: "tiers.anonymous.global",
        line: 7,
        code: "EL_POLICY_PARSE",
        message: "written twice in one mapping (first on line 4); keep one",
      },
    ]);
  });
});

describe("edgelimit check", () => {
  it("prints the resolved rules and exits 0 for a valid policy", () => {
    const result = spawnSync(
      process.execPath,
      [...cliEntry(), "check", "examples/policies/cloudfront.yaml"],
      { encoding: "utf8" },
    );
    expect(result.status).toBe(0);
    expect(result.stdout).toContain("anonymous.path./api/export");
    expect(result.stdout).toContain("challenge < 2x, then block");
    expect(result.stdout).toContain("fail closed (503) on: /api/admin/, /api/billing/");
    // The "store down" column: counted locally, closed under the fail-closed prefixes.
    expect(result.stdout).toMatch(/anonymous\.path\.\/api\/export .* local\n/);
    expect(result.stdout).toContain("local; closed under /api/admin/, /api/billing/");
  });

  it("exits non-zero and names the field and line for each error", () => {
    const result = check(
      "version: 1\ntiers:\n  anonymous:\n    global: { limit: -5 }\n  gold:\n    global: 1\n",
    );
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("line 4: tiers.anonymous.global.limit");
    expect(result.stderr).toContain('line 5: tiers.gold: unknown tier "gold"');
  });

  it("refuses a path key with a line break, naming it on one line, and shows how the others match", () => {
    const refused = check('tiers:\n  anonymous:\n    paths:\n      "/api/x\\r\\n": 5\n');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(
      "line 4: tiers.anonymous.paths./api/x\\r\\n: has a control character (\\r, at position 7)",
    );
    const accepted = check(
      "tiers:\n  anonymous:\n    global: 60\n    paths:\n      /préférences: 5\n      /商品: 5\n",
    );
    expect(accepted.code).toBe(0);
    expect(accepted.stdout).toMatch(
      /anonymous\.path\.\/préférences +anonymous by ip +\/pr%C3%A9f%C3%A9rences /,
    );
    expect(accepted.stdout).toMatch(
      /anonymous\.path\.\/商品 +anonymous by ip +\/%E5%95%86%E5%93%81 /,
    );
    expect(accepted.stdout).toContain("paths: letter case as the framework routes");
  });

  it("exits non-zero for a missing file", () => {
    const result = spawnSync(process.execPath, [...cliEntry(), "check", join(dir, "nope.yaml")], {
      encoding: "utf8",
    });
    expect(result.status).toBe(1);
    expect(result.stderr).toContain("cannot read policy file");
  });
});
