import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { formatIssue, policyWarningsOf } from "../../src/policy/load.js";

const JWT = `identity:
  user:
    jwt:
      algorithms: [HS256]
      secret: { value: lint-test-secret-0123456789abcdef }
      userClaim: sub
      planClaim: plan
`;

const warningsOf = (text: string) => policyWarningsOf(text, "policy.yaml").map(formatIssue);

describe("check's warnings: valid policies that leave traffic unlimited", () => {
  it("says nothing about the seed policy, which counts everyone everywhere", () => {
    const seed = `version: 1\n${JWT}tiers:\n  anonymous: { global: 60 }\n  authenticated: { global: 300 }\nfailClosed: [/api/admin/]\n`;
    expect(warningsOf(seed)).toEqual([]);
  });

  it("points a policy of namespaces at its namespaces, not at a tiers section it does not have", () => {
    const text = `version: 1\n${JWT}namespaces:\n  login:\n    match: { path: /login, methods: [POST] }\n    limit: 5\n  api:\n    match: { path: /api/ }\n    rules:\n      - { name: rate, limit: 100 }\n      - { name: daily, key: user, plans: [free], limit: 50, window: 1d }\n`;
    expect(warningsOf(text)).toEqual([
      "line 9: namespaces: no rule applies to every path: anonymous and authenticated requests outside POST /login, /api/ are counted by no rule, so they are unlimited; if they should be limited, add tiers.anonymous.global and tiers.authenticated.global, or a namespace without match.path",
    ]);
  });

  it("names a tier that no rule counts", () => {
    const text = `version: 1\n${JWT}tiers:\n  anonymous:\n    global: 60\n`;
    expect(warningsOf(text)).toEqual([
      "line 9: tiers.authenticated: no rule counts authenticated requests: their traffic is unlimited; add tiers.authenticated.global",
    ]);
  });

  it("names tokens without a plan claim when only plans have rules", () => {
    const text = `version: 1\n${JWT}tiers:\n  anonymous: { global: 60 }\n  authenticated:\n    plans: { free: 100, pro: 1000 }\n`;
    expect(warningsOf(text)).toContainEqual(
      "line 12: tiers.authenticated.plans: a verified user whose token carries no plan matches no rule (unlimited): add tiers.authenticated.global",
    );
  });

  it("names a fail-closed path that no rule covers, which would be allowed with the store down", () => {
    const text = `version: 1\ntiers:\n  anonymous:\n    paths: { /api/: 30 }\nfailClosed:\n  - /api/billing/\n  - /admin/\n`;
    const warnings = warningsOf(text);
    expect(warnings).toContainEqual(
      "line 7: failClosed.1: anonymous requests under /admin/ match no rule, so they never reach the store and are allowed even when it is down (no 503); add a rule that covers /admin/",
    );
    expect(warnings.some((warning) => warning.includes("/api/billing/ match no rule"))).toBe(false);
  });

  it("names a rule that fails open, whose requests are unlimited while the store is down", () => {
    const text = `version: 1\n${JWT}tiers:\n  anonymous:\n    global: 60\n    paths:\n      /api/x: { limit: 5, failMode: open }\n  authenticated: { global: 300 }\n`;
    expect(warningsOf(text)).toEqual([
      "line 13: tiers.anonymous.paths./api/x.failMode: rule anonymous.path./api/x fails open: while the store is down its requests are not limited at all; failMode: local (the default) counts them in each process instead",
    ]);
  });

  it("names a plan filter for a plan the policy does not define", () => {
    const text = `version: 1\n${JWT}tiers:\n  anonymous: { global: 60 }\n  authenticated:\n    global: 300\n    plans: { free: 100 }\nnamespaces:\n  exports:\n    match: { path: /api/export }\n    limit: 10\n    plans: [gold]\n`;
    expect(
      warningsOf(text).some((warning) =>
        warning.includes("plan gold, which tiers.authenticated.plans does not define"),
      ),
    ).toBe(true);
  });

  it("names prefixes that match the same paths", () => {
    const text =
      "version: 1\ntiers:\n  anonymous:\n    global: 60\n    paths:\n      /api/x: 5\n      /api/x/: 10\n";
    expect(warningsOf(text)).toEqual([
      "line 7: tiers.anonymous.paths./api/x/: /api/x/ and /api/x name the same path (a prefix matches with or without its trailing slash, however its escapes are written): only one of anonymous.path./api/x/ and anonymous.path./api/x ever applies; keep one",
    ]);
  });

  it("names keys that are one path however their escapes are written", () => {
    const text =
      "version: 1\ntiers:\n  anonymous:\n    global: 60\n    paths:\n      /préférences: 5\n      /pr%c3%a9f%c3%a9rences: 10\n";
    expect(warningsOf(text)).toEqual([
      "line 7: tiers.anonymous.paths./pr%c3%a9f%c3%a9rences: /pr%C3%A9f%C3%A9rences and /pr%C3%A9f%C3%A9rences name the same path (a prefix matches with or without its trailing slash, however its escapes are written): only one of anonymous.path./pr%c3%a9f%c3%a9rences and anonymous.path./préférences ever applies; keep one",
    ]);
  });

  it("names keys that differ in letter case only, unless the policy says case matters", () => {
    const paths = "    paths:\n      /api/Export: 5\n      /api/export: 10\n";
    const text = `version: 1\ntiers:\n  anonymous:\n    global: 60\n${paths}`;
    expect(warningsOf(text)).toEqual([
      "line 7: tiers.anonymous.paths./api/export: /api/export and /api/Export differ in letter case only, which paths match in unless the origin routes case exactly: only one of anonymous.path./api/export and anonymous.path./api/Export ever applies; keep one, or set paths.caseSensitive: true if the origin tells them apart",
    ]);
    expect(warningsOf(`paths: { caseSensitive: true }\n${text}`)).toEqual([]);
  });
});

describe("edgelimit check with warnings", () => {
  const dir = mkdtempSync(join(tmpdir(), "edgelimit-lint-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, "policy.yaml");
  writeFileSync(file, "version: 1\ntiers:\n  anonymous:\n    paths: { /api/: 30 }\n");
  const check = (...args: string[]) =>
    spawnSync(process.execPath, ["dist/cli/main.js", "check", file, ...args], { encoding: "utf8" });

  it("prints the warnings with their lines and still passes", () => {
    const result = check();
    expect(result.status).toBe(0);
    expect(result.stderr).toContain(
      "warning: line 3: tiers.anonymous: no anonymous rule applies to every path",
    );
  });

  it("warns about examples/policies/workers.yaml's namespaces, where its traffic goes uncounted", () => {
    const result = spawnSync(
      process.execPath,
      ["dist/cli/main.js", "check", "examples/policies/workers.yaml"],
      { encoding: "utf8" },
    );
    expect(result.status).toBe(0);
    expect(result.stderr).not.toMatch(/line \d+: tiers\./);
    expect(result.stderr).toContain(
      "examples/policies/workers.yaml: warning: line 18: namespaces: no rule applies to every path: anonymous and authenticated requests outside POST /login, /api/ are counted by no rule",
    );
  });

  it("fails with --strict", () => {
    const result = check("--strict");
    expect(result.status).toBe(1);
    expect(result.stderr).toContain("--strict makes them errors");
  });
});
