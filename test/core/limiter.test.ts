import { describe, expect, it } from "vitest";
import { normalizePath } from "../../src/core/path.js";
import type { CounterSpec, CounterState, Store } from "../../src/core/types.js";
import { createLimiter } from "../../src/limiter.js";
import { definePolicy, loadPolicy } from "../../src/policy/load.js";
import type { PolicyInput } from "../../src/policy/schema.js";
import { memoryStore } from "../../src/stores/memory.js";
import { JWT_SECRET, signToken } from "../support/jwt.js";

const env = { EDGELIMIT_JWT_SECRET: JWT_SECRET };
const T0 = Date.UTC(2026, 10, 30, 12, 0, 10);

function limiterFor(input: PolicyInput, store: Store = memoryStore(), now = T0) {
  let clock = now;
  const limiter = createLimiter({ policy: definePolicy(input), store, env, clock: () => clock });
  return { limiter, advance: (ms: number) => (clock += ms) };
}

const seedPolicy = () => loadPolicy("examples/policies/cloudfront.yaml");

/** The seed's policy on a fresh memory store, with the clock stopped at T0. */
const seedLimiter = () =>
  createLimiter({ policy: seedPolicy(), store: memoryStore(), env, clock: () => T0 });

describe("exactness", () => {
  for (const algorithm of ["fixed-window", "sliding-window", "token-bucket"] as const) {
    it(`${algorithm}: 1,000 concurrent requests against a limit of 100 admit exactly 100`, async () => {
      const { limiter } = limiterFor({
        tiers: { anonymous: { global: { limit: 100, algorithm } } },
      });
      const verdicts = await Promise.all(
        Array.from({ length: 1000 }, () => limiter.check({ ip: "203.0.113.7", path: "/" })),
      );
      expect(verdicts.filter((v) => v.action === "allow")).toHaveLength(100);
      expect(verdicts.filter((v) => v.status === 429)).toHaveLength(900);
    });
  }
});

describe("the seed's policy", () => {
  it("limits a per-path rule and the global rule together, each counted once per request", async () => {
    let now = T0;
    const limiter = createLimiter({
      policy: seedPolicy(),
      store: memoryStore(),
      env,
      clock: () => now,
    });
    const results = [];
    for (let i = 0; i < 4; i++)
      results.push(await limiter.check({ ip: "198.51.100.1", path: "/api/export" }));
    expect(results.map((v) => v.status)).toEqual([200, 200, 200, 429]);
    expect(results[3]?.rule).toBe("anonymous.path./api/export");
    // The other paths still have the global budget minus the 3 admitted exports.
    const home = await limiter.check({ ip: "198.51.100.1", path: "/" });
    expect(home.action).toBe("allow");
    expect(home.remaining).toBe(60 - 4);
    now += 60_000;
    expect((await limiter.check({ ip: "198.51.100.1", path: "/api/export" })).action).toBe("allow");
  });

  it("answers 429 with the JSON body, real Retry-After and every rate-limit header", async () => {
    const limiter = seedLimiter();
    for (let i = 0; i < 3; i++) await limiter.check({ ip: "198.51.100.2", path: "/api/export" });
    const verdict = await limiter.check({ ip: "198.51.100.2", path: "/api/export" });
    expect(verdict.status).toBe(429);
    // T0 is 10 s into its minute: 50 s to the window's end, not a constant 60.
    expect(verdict.headers["retry-after"]).toBe("50");
    expect(verdict.headers["cache-control"]).toBe("no-store");
    expect(verdict.headers["x-ratelimit-limit"]).toBe("3");
    expect(verdict.headers["x-ratelimit-remaining"]).toBe("0");
    expect(verdict.headers["x-ratelimit-reset"]).toBe(String((T0 + 50_000) / 1000));
    expect(verdict.headers.ratelimit).toBe('"anonymous.path./api/export";r=0;t=50');
    expect(verdict.headers["ratelimit-policy"]).toContain('"anonymous.path./api/export";q=3;w=60');
    expect(JSON.parse(verdict.body ?? "")).toEqual({
      error: "rate_limit_exceeded",
      message: "Too many requests. Try again in 50 seconds.",
      retry_after: 50,
    });
  });

  it("gives the origin the remaining count and the client the headers on allowed requests", async () => {
    const limiter = seedLimiter();
    const verdict = await limiter.check({ ip: "198.51.100.3", path: "/api/search" });
    expect(verdict.originHeaders).toEqual({ "x-ratelimit-remaining": "29" });
    expect(verdict.headers["x-ratelimit-remaining"]).toBe("29");
  });

  it("lists in RateLimit-Policy exactly the rules that applied, request after request", async () => {
    const limiter = seedLimiter();
    const global = '"anonymous.global";q=60;w=60';
    const expected: Record<string, string> = {
      "/api/search": `${global}, "anonymous.path./api/search";q=30;w=60`,
      "/products": global,
      "/api/export": `${global}, "anonymous.path./api/export";q=3;w=60`,
    };
    // Alternating rule sets: a field kept for one set is never sent for another.
    for (let round = 0; round < 2; round++) {
      for (const [path, field] of Object.entries(expected)) {
        const verdict = await limiter.check({ ip: "198.51.100.5", path });
        expect(verdict.headers["ratelimit-policy"]).toBe(field);
      }
    }
  });

  it("challenges anonymous clients over the global limit but under 2x, then blocks", async () => {
    const limiter = seedLimiter();
    const statuses: number[] = [];
    for (let i = 0; i < 125; i++)
      statuses.push((await limiter.check({ ip: "198.51.100.4", path: "/products?page=2" })).status);
    expect(statuses.slice(0, 60).every((s) => s === 200)).toBe(true);
    expect(statuses.slice(60, 119).every((s) => s === 302)).toBe(true);
    expect(statuses.slice(119).every((s) => s === 429)).toBe(true);
  });

  it("sends the challenge to /captcha with the normalised path and query as redirect", async () => {
    const limiter = seedLimiter();
    let verdict = await limiter.check({
      ip: "198.51.100.6",
      path: "//evil.example/../products?q=1",
    });
    for (let i = 0; i < 60; i++)
      verdict = await limiter.check({ ip: "198.51.100.6", path: "//evil.example/../products?q=1" });
    expect(verdict.action).toBe("challenge");
    expect(verdict.headers.location).toBe(
      `/captcha?redirect=${encodeURIComponent("/products?q=1")}`,
    );
  });

  it("lets a verified pass through the challenge band but never past the hard limit", async () => {
    const limiter = createLimiter({
      policy: seedPolicy(),
      store: memoryStore(),
      env,
      clock: () => T0,
      passes: { verify: (_request, subject) => subject === "ip:198.51.100.7" },
    });
    const statuses: number[] = [];
    for (let i = 0; i < 130; i++)
      statuses.push((await limiter.check({ ip: "198.51.100.7", path: "/" })).status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(120);
    expect(statuses.slice(120).every((s) => s === 429)).toBe(true);
  });

  it("counts authenticated users by their verified id with their plan's limit", async () => {
    const limiter = createLimiter({ policy: seedPolicy(), store: memoryStore(), env });
    const pro = await signToken({ sub: "u_pro", plan: "pro" });
    const unknownPlan = await signToken({ sub: "u_odd", plan: "platinum" });
    const noPlan = await signToken({ sub: "u_none" });
    const check = (token: string) =>
      limiter.check({
        ip: "198.51.100.8",
        path: "/",
        headers: { authorization: `Bearer ${token}` },
      });
    expect((await check(pro)).limit).toBe(1000);
    expect((await check(pro)).subject).toBe("user:u_pro");
    expect((await check(unknownPlan)).limit).toBe(100);
    expect((await check(noPlan)).limit).toBe(300);
  });
});

describe("matching", () => {
  it("keeps each path's matched rules apart for every tier, plan and method", async () => {
    const input: PolicyInput = {
      version: 1,
      identity: {
        user: { jwt: { algorithms: ["HS256"], secret: { env: "EDGELIMIT_JWT_SECRET" } } },
      },
      tiers: {
        anonymous: { global: 60, paths: { "/api/export": 3, "/api/search": 30 } },
        authenticated: {
          global: 300,
          plans: { free: 100, pro: 1000 },
          paths: { "/api/export": 20 },
        },
      },
      plans: { default: "free" },
      namespaces: { login: { match: { path: "/login", methods: ["POST"] }, key: "ip", limit: 5 } },
    };
    const tokens = [
      undefined,
      await signToken({ sub: "u_pro", plan: "pro" }),
      await signToken({ sub: "u_odd", plan: "platinum" }),
      await signToken({ sub: "u_none" }),
    ];
    const paths = ["/", "/api/export", "/api//export?x=1", "/api/search", "/login", "/LOGIN"];
    const methods = ["GET", "POST", "post"];
    // One limiter that has seen every combination before, against a new one for each request.
    const remembering = createLimiter({ policy: definePolicy(input), store: memoryStore(), env });
    const matched = (verdict: { outcomes: readonly { ruleId: string }[] }) =>
      verdict.outcomes.map((outcome) => outcome.ruleId);
    for (let round = 0; round < 2; round++) {
      for (const token of tokens) {
        for (const path of paths) {
          for (const method of methods) {
            const request = {
              ip: "198.51.100.40",
              method,
              path,
              headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
            };
            const fresh = createLimiter({ policy: definePolicy(input), store: memoryStore(), env });
            expect(matched(await remembering.check(request))).toEqual(
              matched(await fresh.check(request)),
            );
          }
        }
      }
    }
  });
});

describe("failure of the store", () => {
  const failing: Store = {
    name: "failing",
    apply: () => Promise.reject(new Error("connection refused")),
  };
  const slow: Store = {
    name: "slow",
    apply: (counters: readonly CounterSpec[]) =>
      new Promise<CounterState[]>((resolve) =>
        setTimeout(
          () =>
            resolve(
              counters.map(() => ({
                allowed: true,
                count: 1,
                remaining: 1,
                resetAt: 0,
                retryAfterMs: 0,
              })),
            ),
          2000,
        ),
      ),
  };

  it("counts locally on ordinary paths (the default) and fails closed (503) on critical ones", async () => {
    const limiter = createLimiter({ policy: seedPolicy(), store: failing, env });
    const local = await limiter.check({ ip: "198.51.100.9", path: "/api/search" });
    expect(local.action).toBe("allow");
    expect(local.reason).toBe("store-failed-local");
    expect(local.storeError).toMatch(/connection refused/);
    const closed = await limiter.check({ ip: "198.51.100.9", path: "/api/billing/invoices" });
    expect(closed.action).toBe("unavailable");
    expect(closed.status).toBe(503);
    expect(closed.headers["retry-after"]).toBe("5");
    expect(JSON.parse(closed.body ?? "").error).toBe("rate_limit_unavailable");
  });

  it("treats a store slower than the time budget as failed", async () => {
    const limiter = createLimiter({ policy: { ...seedPolicy(), budgetMs: 30 }, store: slow, env });
    const started = performance.now();
    const [open, closed] = await Promise.all([
      limiter.check({ ip: "198.51.100.10", path: "/" }),
      limiter.check({ ip: "198.51.100.10", path: "/api/admin/users" }),
    ]);
    expect(performance.now() - started).toBeLessThan(500);
    expect(open.reason).toBe("store-failed-local");
    expect(closed.status).toBe(503);
  });

  it("fails open where the policy asks for it, closed where it asks for that", async () => {
    const { limiter } = limiterFor(
      {
        defaults: { failMode: "open" },
        tiers: {
          anonymous: { global: 1, paths: { "/api/tight": { limit: 1, failMode: "local" } } },
        },
      },
      failing,
    );
    const reasons: string[] = [];
    for (let i = 0; i < 3; i++) {
      reasons.push((await limiter.check({ ip: "198.51.100.13", path: "/" })).reason);
    }
    expect(reasons).toEqual(["store-failed-open", "store-failed-open", "store-failed-open"]);
    // The path rule counts locally; the global rule, open, is not counted at all.
    const tight: string[] = [];
    for (let i = 0; i < 3; i++) {
      const verdict = await limiter.check({ ip: "198.51.100.13", path: "/api/tight" });
      tight.push(`${verdict.status} ${verdict.reason} ${verdict.rule}`);
    }
    expect(tight).toEqual([
      "200 store-failed-local anonymous.path./api/tight",
      "429 store-failed-local anonymous.path./api/tight",
      "429 store-failed-local anonymous.path./api/tight",
    ]);
  });

  it("honours a rule's own failMode", async () => {
    const { limiter } = limiterFor(
      {
        namespaces: {
          login: { match: { path: "/login" }, key: "ip", limit: 5, failMode: "closed" },
        },
      },
      failing,
    );
    expect((await limiter.check({ ip: "198.51.100.11", path: "/login" })).status).toBe(503);
  });
});

describe("rule options", () => {
  it("turns disclosure off: a login 429 tells nothing beyond Retry-After", async () => {
    const { limiter } = limiterFor({
      namespaces: {
        login: {
          match: { path: "/login", methods: ["POST"] },
          key: "ip",
          limit: 5,
          disclose: false,
        },
      },
    });
    let verdict = await limiter.check({ ip: "198.51.100.12", method: "POST", path: "/login" });
    expect(verdict.headers).toEqual({});
    for (let i = 0; i < 5; i++)
      verdict = await limiter.check({ ip: "198.51.100.12", method: "POST", path: "/login" });
    expect(verdict.status).toBe(429);
    expect(Object.keys(verdict.headers).sort()).toEqual([
      "cache-control",
      "content-type",
      "retry-after",
    ]);
    // GET /login is not the login operation.
    expect(
      (await limiter.check({ ip: "198.51.100.12", method: "GET", path: "/login" })).action,
    ).toBe("allow");
  });

  it("shadow rules count and report without enforcing", async () => {
    const { limiter } = limiterFor({
      namespaces: { trial: { limit: 2, key: "ip", shadow: true } },
    });
    let verdict = await limiter.check({ ip: "198.51.100.13", path: "/" });
    for (let i = 0; i < 3; i++) verdict = await limiter.check({ ip: "198.51.100.13", path: "/" });
    expect(verdict.action).toBe("allow");
    expect(verdict.shadowed).toEqual(["trial"]);
  });

  it("keeps namespaces apart: exhausting login does not spend the API's budget", async () => {
    const { limiter } = limiterFor({
      namespaces: {
        login: { match: { path: "/login" }, key: "ip", limit: 2 },
        api: { match: { path: "/api/" }, key: "ip", limit: 2 },
      },
    });
    for (let i = 0; i < 5; i++) await limiter.check({ ip: "198.51.100.14", path: "/login" });
    expect((await limiter.check({ ip: "198.51.100.14", path: "/api/x" })).action).toBe("allow");
  });

  it("matches paths however the client spells them", async () => {
    const { limiter } = limiterFor({ tiers: { anonymous: { paths: { "/api/reports": 1 } } } });
    await limiter.check({ ip: "198.51.100.15", path: "/api/reports" });
    for (const spelling of [
      "/api//reports",
      "/api/./reports",
      "/api/x/../reports",
      "/api/%72eports",
      "/api/reports/?x=1",
      "\\api\\reports",
    ]) {
      expect((await limiter.check({ ip: "198.51.100.15", path: spelling })).status, spelling).toBe(
        429,
      );
    }
    expect((await limiter.check({ ip: "198.51.100.15", path: "/api/reportsX" })).action).toBe(
      "allow",
    );
  });

  it("drops the query and the fragment, whichever comes first", () => {
    expect(normalizePath("/api/search?q=shoes")).toBe("/api/search");
    expect(normalizePath("/api/search#top")).toBe("/api/search");
    expect(normalizePath("/a?x=1#frag")).toBe("/a");
    expect(normalizePath("/a#frag?not-a-query")).toBe("/a");
    expect(normalizePath("/a//b?c//d")).toBe("/a/b");
    expect(normalizePath("?only")).toBe("/");
    expect(normalizePath("/plain")).toBe("/plain");
    // What needs rewriting is looked for before the query only, and at the very end too.
    expect(normalizePath("/a/b?x=/./..//%41")).toBe("/a/b");
    expect(normalizePath("/a/.")).toBe("/a/");
    expect(normalizePath("/a/%41")).toBe("/a/A");
    expect(normalizePath("a/b")).toBe("/a/b");
  });

  it("answers allowlisted addresses without counting and denylisted ones with 403", async () => {
    const { limiter } = limiterFor({
      allowlist: ["10.0.0.0/8"],
      denylist: ["192.0.2.0/24"],
      tiers: { anonymous: { global: 1 } },
    });
    for (let i = 0; i < 5; i++)
      expect((await limiter.check({ ip: "10.1.2.3", path: "/" })).reason).toBe("allowlisted");
    expect((await limiter.check({ ip: "192.0.2.9", path: "/" })).status).toBe(403);
  });

  it("reloads a policy in place and keeps the counters", async () => {
    const { limiter } = limiterFor({ tiers: { anonymous: { global: 3 } } });
    for (let i = 0; i < 3; i++) await limiter.check({ ip: "198.51.100.16", path: "/" });
    limiter.reload(definePolicy({ tiers: { anonymous: { global: 4 } } }));
    expect((await limiter.check({ ip: "198.51.100.16", path: "/" })).action).toBe("allow");
    expect((await limiter.check({ ip: "198.51.100.16", path: "/" })).action).toBe("block");
  });
});

describe("decide", () => {
  it("answers without a promise when the identity is known and the store is in-process", async () => {
    const { limiter } = limiterFor({ tiers: { anonymous: { global: 2 } } });
    const first = limiter.decide({ ip: "198.51.100.20", path: "/" });
    expect(first).not.toBeInstanceOf(Promise);
    expect((first as { action: string }).action).toBe("allow");
    const remote = createLimiter({
      policy: definePolicy({ tiers: { anonymous: { global: 2 } } }),
      store: { name: "remote", apply: (counters) => memoryStore().apply(counters, T0) },
      env,
    });
    expect(remote.decide({ ip: "198.51.100.20", path: "/" })).toBeInstanceOf(Promise);
    // check() and decide() agree.
    expect((await limiter.check({ ip: "198.51.100.20", path: "/" })).action).toBe("allow");
    expect(await limiter.decide({ ip: "198.51.100.20", path: "/" })).toMatchObject({ status: 429 });
  });
});
