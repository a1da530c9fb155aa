/**
 * What users of express-rate-limit and @upstash/ratelimit reach for, through real servers:
 * skip, a per-request cost, a custom refusal, and the verdict on the request for handlers.
 */
import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import express from "express";
import { afterAll, describe, expect, it } from "vitest";
import { withRateLimit } from "../../src/adapters/fetch.js";
import { nodeRateLimit, type RateLimitedRequest } from "../../src/adapters/node.js";
import { createLimiter } from "../../src/limiter.js";
import { definePolicy } from "../../src/policy/load.js";
import { memoryStore } from "../../src/stores/memory.js";
import { loopbackServers } from "../support/listen.js";
import { withinOneWindow } from "../support/windows.js";

const policy = definePolicy({ tiers: { anonymous: { global: 5 } } });
const listen = loopbackServers();
/** Servers that are not node:http ones (@hono/node-server's), closed after the file too. */
const servers: { close(): unknown }[] = [];
afterAll(() => {
  for (const server of servers) server.close();
});

describe("nodeRateLimit options (Express)", () => {
  it("skips, costs, answers refusals its own way and puts the verdict on req.rateLimit", async () => {
    const limiter = createLimiter({ policy, store: memoryStore() });
    const app = express();
    app.use(
      nodeRateLimit({
        limiter,
        skip: (request) => request.url === "/health",
        cost: (request) => (request.url?.startsWith("/api/bulk") ? 3 : undefined),
        onRefused: (_request, response, verdict) => {
          response.statusCode = 429;
          response.setHeader("content-type", "text/plain");
          response.end(`slow down: ${verdict.retryAfterSeconds}s (${verdict.rule})`);
        },
      }),
    );
    app.get("/{*path}", (request, response) => {
      const verdict = (request as RateLimitedRequest).rateLimit;
      response.send(`remaining ${verdict?.remaining ?? "none"}`);
    });
    const base = await listen(createServer(app));
    // `global: 5` is a minute window on the real clock: the requests must not straddle one.
    await withinOneWindow(60_000, 2_000);

    // Skipped: never counted, no headers, no verdict.
    for (let i = 0; i < 10; i++) {
      const health = await fetch(`${base}/health`);
      expect(await health.text()).toBe("remaining none");
      expect(health.headers.get("x-ratelimit-remaining")).toBeNull();
    }
    // A bulk call costs 3 of the 5; the handler reads the verdict from the request.
    const bulk = await fetch(`${base}/api/bulk`);
    expect(await bulk.text()).toBe("remaining 2");
    expect(await (await fetch(`${base}/home`)).text()).toBe("remaining 1");
    expect(await (await fetch(`${base}/home`)).text()).toBe("remaining 0");
    // Refused: the custom answer, with the verdict's headers set first.
    const refused = await fetch(`${base}/home`);
    expect(refused.status).toBe(429);
    expect(await refused.text()).toMatch(/^slow down: \d+s \(anonymous\.global\)$/);
    expect(refused.headers.get("retry-after")).toMatch(/^\d+$/);
  });

  it("refuses a cost that is not a whole number of units", async () => {
    const limiter = createLimiter({ policy, store: memoryStore() });
    const app = express();
    app.use(nodeRateLimit({ limiter, cost: () => 0.5 }));
    app.use(((error, _request, response, _next) => {
      response.status(500).send((error as Error).message);
    }) as express.ErrorRequestHandler);
    const base = await listen(createServer(app));
    const answer = await fetch(`${base}/`);
    expect(answer.status).toBe(500);
    expect(await answer.text()).toContain("cost() must be a whole number");
  });
});

describe("withRateLimit options (fetch handlers)", () => {
  it("skips, costs, answers refusals its own way and hands the verdict to the handler", async () => {
    const limiter = createLimiter({ policy, store: memoryStore() });
    const handler = withRateLimit(
      (_request: Request, _context: unknown, verdict) =>
        new Response(`remaining ${verdict?.remaining ?? "none"}`),
      {
        limiter,
        ip: () => "203.0.113.20",
        skip: (request) => new URL(request.url).pathname === "/health",
        cost: (request) => (new URL(request.url).pathname === "/api/bulk" ? 4 : undefined),
        onRefused: (_request, verdict) =>
          new Response(`busy, retry in ${verdict.retryAfterSeconds}s`, { status: 503 }),
      },
    );
    const server = serve({
      fetch: (request) => handler(request, undefined),
      port: 0,
      hostname: "127.0.0.1",
    });
    await once(server, "listening");
    servers.push(server);
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    // `global: 5` is a minute window on the real clock: the requests must not straddle one.
    await withinOneWindow(60_000, 2_000);

    expect(await (await fetch(`${base}/health`)).text()).toBe("remaining none");
    expect(await (await fetch(`${base}/api/bulk`)).text()).toBe("remaining 1");
    expect(await (await fetch(`${base}/home`)).text()).toBe("remaining 0");
    const refused = await fetch(`${base}/home`);
    expect(refused.status).toBe(503);
    expect(await refused.text()).toMatch(/^busy, retry in \d+s$/);
    expect(refused.headers.get("retry-after")).toMatch(/^\d+$/);
    expect(await (await fetch(`${base}/health`)).text()).toBe("remaining none");
  });
});

describe("a user the application verified (its session)", () => {
  const sessions = new Map([["s-alice", { id: "alice", plan: "pro" }]]);
  const allowing = definePolicy({
    identity: { user: { application: true } },
    tiers: { anonymous: { global: 2 }, authenticated: { global: 3, plans: { pro: 4 } } },
  });

  it("is counted as that user when the policy allows it, and only from the application", async () => {
    const limiter = createLimiter({ policy: allowing, store: memoryStore() });
    const app = express();
    app.use(
      nodeRateLimit({
        limiter,
        // The application's own session lookup: a cookie it issued, not a claim of the client.
        user: (request) =>
          sessions.get(/session=([\w-]+)/.exec(request.headers.cookie ?? "")?.[1] ?? ""),
      }),
    );
    app.get("/{*path}", (request, response) => {
      const verdict = (request as RateLimitedRequest).rateLimit;
      response.send(`${verdict?.subject} ${verdict?.rule} ${verdict?.remaining}`);
    });
    const base = await listen(createServer(app));
    const asAlice = { headers: { cookie: "session=s-alice" } };
    expect(await (await fetch(`${base}/a`, asAlice)).text()).toBe(
      "user:alice authenticated.plan.pro 3",
    );
    // A client that names a user without the application's session is anonymous.
    const forged = await fetch(`${base}/a`, {
      headers: { "x-user-id": "alice", cookie: "session=s-nobody" },
    });
    expect(await forged.text()).toBe("ip:127.0.0.1 anonymous.global 1");
  });

  it("is refused at setup when the policy does not allow it", () => {
    const limiter = createLimiter({ policy, store: memoryStore() });
    expect(() => nodeRateLimit({ limiter, user: () => ({ id: "alice" }) })).toThrow(
      /identity.user.application: true/,
    );
    expect(() =>
      withRateLimit(() => new Response("ok"), {
        limiter,
        ip: () => "192.0.2.1",
        user: () => undefined,
      }),
    ).toThrow(/identity.user.application: true/);
  });

  it("is ignored by the core unless the policy allows it, whoever builds the request", async () => {
    const limiter = createLimiter({ policy, store: memoryStore() });
    const verdict = await limiter.check({ ip: "192.0.2.9", path: "/", user: { id: "mallory" } });
    expect(verdict.subject).toBe("ip:192.0.2.9");
    expect(verdict.tier).toBe("anonymous");
  });
});

describe("resetting a subject's counters (after a successful login)", () => {
  const loginPolicy = definePolicy({
    tiers: { anonymous: { global: 100 } },
    namespaces: { login: { match: { path: "/login", methods: ["POST"] }, limit: 3 } },
  });

  it("forgets the failures of the rule named, in the store and the block cache, and nothing else", async () => {
    // Minute windows on the real clock: the counts below must stay in one minute.
    await withinOneWindow(60_000, 2_000);
    const limiter = createLimiter({ policy: loginPolicy, store: memoryStore(), blockCache: {} });
    const login = { ip: "198.51.100.30", method: "POST", path: "/login" };
    const results: string[] = [];
    for (let i = 0; i < 4; i++) results.push((await limiter.check(login)).action);
    expect(results).toEqual(["allow", "allow", "allow", "block"]);
    // The block is now answered from the block cache; reset clears both.
    expect(await limiter.reset(login, ["login"])).toEqual(["login"]);
    const after = await limiter.check(login);
    expect(after.action).toBe("allow");
    expect(after.outcomes.find((outcome) => outcome.ruleId === "login")?.state.remaining).toBe(2);
    // The global rule kept its count: 3 admitted before, and this one (the refused request
    // counted only on the rule that refused it).
    expect(
      after.outcomes.find((outcome) => outcome.ruleId === "anonymous.global")?.state.count,
    ).toBe(4);
    // Another client's counters are its own.
    const other = await limiter.check({ ...login, ip: "198.51.100.31" });
    expect(other.outcomes.find((outcome) => outcome.ruleId === "login")?.state.remaining).toBe(2);
  });

  it("says clearly when the store cannot reset", async () => {
    const store = memoryStore();
    const limiter = createLimiter({
      policy: loginPolicy,
      store: { name: "custom", apply: (counters, now) => store.apply(counters, now) },
    });
    await expect(limiter.reset({ ip: "192.0.2.1", path: "/login" })).rejects.toThrow(
      /the custom store cannot reset counters/,
    );
  });
});
