/**
 * A rule's path counts every spelling of it that the origin routes to the same handler: letter
 * case as the framework routes (or the policy says), percent-escapes however they are written,
 * non-ASCII keys, matrix parameters; a key that can never match is refused at load.
 */
import { describe, expect, it } from "vitest";
import { EdgelimitError } from "../../src/core/errors.js";
import type { RequestDescription } from "../../src/core/types.js";
import { createLimiter } from "../../src/limiter.js";
import { definePolicy, parsePolicy } from "../../src/policy/load.js";
import type { PolicyInput } from "../../src/policy/schema.js";
import { memoryStore } from "../../src/stores/memory.js";

const T0 = Date.UTC(2026, 10, 30, 12, 0, 10);
const IP = "198.51.100.40";

function limiterFor(input: PolicyInput) {
  return createLimiter({ policy: definePolicy(input), store: memoryStore(), clock: () => T0 });
}

type Limiter = ReturnType<typeof limiterFor>;

/** The statuses of `paths` in turn, from one client. */
async function statuses(
  limiter: Limiter,
  paths: readonly string[],
  extra: Partial<RequestDescription> = {},
): Promise<number[]> {
  const answered: number[] = [];
  for (const path of paths) answered.push((await limiter.check({ ip: IP, path, ...extra })).status);
  return answered;
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

const EXPORT_3 = { tiers: { anonymous: { paths: { "/api/export": 3 } } } } as const;

describe("letter case", () => {
  it("counts every casing against the rule where the origin's routing is unknown", async () => {
    const limiter = limiterFor(EXPORT_3);
    expect(
      await statuses(limiter, ["/api/export", "/API/EXPORT", "/Api/Export", "/api/EXPORT/x"]),
    ).toEqual([200, 200, 200, 429]);
  });

  it("follows the framework where the adapter says it routes case-sensitively", async () => {
    const limiter = limiterFor(EXPORT_3);
    const sensitive = { caseSensitiveRouting: true };
    expect(
      await statuses(
        limiter,
        ["/api/export", "/API/EXPORT", "/Api/Export", "/api/export"],
        sensitive,
      ),
    ).toEqual([200, 200, 200, 200]);
    expect(await statuses(limiter, ["/api/export"], sensitive)).toEqual([200]);
    expect(await statuses(limiter, ["/api/export"], sensitive)).toEqual([429]);
  });

  it("follows the framework where the adapter says it routes case-insensitively (Express)", async () => {
    const limiter = limiterFor(EXPORT_3);
    const insensitive = { caseSensitiveRouting: false };
    expect(
      await statuses(
        limiter,
        ["/API/EXPORT", "/Api/Export", "/api/export", "/aPi/eXport"],
        insensitive,
      ),
    ).toEqual([200, 200, 200, 429]);
  });

  it("lets the policy's paths.caseSensitive overrule the framework", async () => {
    const insensitive = limiterFor({ ...EXPORT_3, paths: { caseSensitive: false } });
    expect(
      await statuses(insensitive, ["/API/EXPORT", "/Api/Export", "/api/export", "/API/export"], {
        caseSensitiveRouting: true,
      }),
    ).toEqual([200, 200, 200, 429]);
    const sensitive = limiterFor({ ...EXPORT_3, paths: { caseSensitive: true } });
    expect(
      await statuses(sensitive, ["/API/EXPORT", "/API/EXPORT", "/API/EXPORT", "/API/EXPORT"]),
    ).toEqual([200, 200, 200, 200]);
  });

  it("where the origin is unknown, never lets a casing move a request to a more lenient rule", async () => {
    // A case-sensitive origin sends /api/PUBLIC to what /api/ guards; a case-insensitive one to
    // /api/Public's handler: counting it under both is the one choice that is right for either.
    const limiter = limiterFor({
      tiers: { anonymous: { paths: { "/api/": 2, "/api/Public": 1000 } } },
    });
    expect(await statuses(limiter, ["/api/PUBLIC", "/api/PUBLIC", "/api/PUBLIC"])).toEqual([
      200, 200, 429,
    ]);
  });

  it("fails closed on a fail-closed prefix however the client cases it", async () => {
    const limiter = createLimiter({
      policy: definePolicy({
        tiers: { anonymous: { global: 100 } },
        failClosed: ["/api/admin/"],
      }),
      store: {
        name: "down",
        apply: () => Promise.reject(new Error("connection refused")),
      },
      clock: () => T0,
    });
    for (const path of ["/api/admin/users", "/API/ADMIN/users", "/api/%61dmin/users"]) {
      expect((await limiter.check({ ip: IP, path })).status, path).toBe(503);
    }
  });

  it("refuses a paths.caseSensitive that is not a boolean, naming the field", () => {
    expect(issuesOf("paths:\n  caseSensitive: maybe\n")).toContainEqual(
      expect.objectContaining({ path: "paths.caseSensitive", line: 2 }),
    );
  });
});

describe("percent-escapes", () => {
  it("counts %c3%a9 and %C3%A9 as one path", async () => {
    const limiter = limiterFor({ tiers: { anonymous: { paths: { "/caf%C3%A9": 2 } } } });
    expect(await statuses(limiter, ["/caf%c3%a9", "/caf%C3%A9", "/caf%c3%A9"])).toEqual([
      200, 200, 429,
    ]);
  });

  it("counts escapes of unreserved characters as the characters", async () => {
    const limiter = limiterFor(EXPORT_3);
    expect(
      await statuses(limiter, ["/%61pi/export", "/api/%65xport", "/api/%2e/export", "/api/export"]),
    ).toEqual([200, 200, 200, 429]);
  });

  it("counts matrix parameters and Tomcat's /..;/ against the path the servlet routes to", async () => {
    const limiter = limiterFor(EXPORT_3);
    expect(
      await statuses(limiter, [
        "/api/export;jsessionid=1",
        "/api;x=1/export",
        "/public/..;/api/export",
        "/api/export",
      ]),
    ).toEqual([200, 200, 200, 429]);
  });
});

describe("non-ASCII keys", () => {
  for (const [key, escaped] of [
    ["/préférences", "/pr%C3%A9f%C3%A9rences"],
    ["/商品", "/%E5%95%86%E5%93%81"],
  ] as const) {
    it(`matches ${key} however the client escapes it`, async () => {
      const limiter = limiterFor({ tiers: { anonymous: { paths: { [key]: 5 } } } });
      const spellings = [escaped, escaped.toLowerCase(), key, `${escaped}/x`, `${escaped}?q=1`];
      const answered = await statuses(limiter, [...spellings, escaped, escaped]);
      expect(answered).toEqual([200, 200, 200, 200, 200, 429, 429]);
      const refused = await limiter.check({ ip: IP, path: escaped });
      // The rule's id goes out in the RateLimit headers, which carry ASCII only.
      expect(refused.headers.ratelimit).toMatch(/^[\x20-\x7e]+$/);
      expect(refused.rule).toBe(`anonymous.path.${key}`);
    });
  }

  it("matches a key written with its escapes in lower case or for unreserved characters", async () => {
    const limiter = limiterFor({
      tiers: { anonymous: { paths: { "/pr%c3%a9f%c3%a9r%65nces": 1 } } },
    });
    expect(await statuses(limiter, ["/préférences", "/pr%C3%A9f%C3%A9rences"])).toEqual([200, 429]);
  });

  it("matches a non-ASCII namespace path and fail-closed prefix", async () => {
    const limiter = limiterFor({
      namespaces: { shop: { match: { path: "/商品/" }, key: "ip", limit: 1 } },
    });
    expect(await statuses(limiter, ["/%E5%95%86%E5%93%81/1", "/商品/2"])).toEqual([200, 429]);
  });
});

describe("keys that can never match", () => {
  for (const [what, key] of [
    ["a line feed", "/api/x\\ny"],
    ["a carriage return", "/api/x\\r"],
    ["a tab", "/api/\\tx"],
    ["a NUL", "/api/\\0x"],
    ["a DEL", "/api/\\x7F"],
    ["a C1 control", "/api/\\x85"],
    ["a query string", "/search?q=1"],
    ["a fragment", "/page#top"],
  ] as const) {
    it(`refuses a path key with ${what}, with its code, field and line`, () => {
      const issues = issuesOf(
        `tiers:\n  anonymous:\n    global: 10\n    paths:\n      "${key}": 5\n`,
      );
      expect(issues).toHaveLength(1);
      expect(issues[0]).toMatchObject({ code: "EL_POLICY_INVALID", line: 5 });
      expect(issues[0]?.path).toMatch(/^tiers\.anonymous\.paths\./);
    });
  }

  it("refuses the same in a namespace's path, failClosed and the challenge path", () => {
    const issues = issuesOf(
      [
        "namespaces:",
        '  login: { match: { path: "/login\\r\\n" }, key: ip, limit: 5 }',
        "failClosed:",
        '  - "/admin/\\n"',
        "challenge:",
        '  path: "/captcha\\u0000"',
      ].join("\n"),
    );
    expect(issues.map((issue) => [issue.path, issue.line, issue.code])).toEqual([
      ["namespaces.login.match.path", 2, "EL_POLICY_INVALID"],
      ["failClosed.0", 4, "EL_POLICY_INVALID"],
      ["challenge.path", 6, "EL_POLICY_INVALID"],
    ]);
  });

  it("says what to write instead", () => {
    const [issue] = issuesOf('tiers:\n  anonymous:\n    paths:\n      "/a\\r\\nb": 5\n');
    expect(issue?.message).toMatch(/control character/);
    const [query] = issuesOf('tiers:\n  anonymous:\n    paths:\n      "/search?q=1": 5\n');
    expect(query?.message).toMatch(/query string/);
  });
});
