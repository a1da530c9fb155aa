import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import express from "express";
import Fastify from "fastify";
import { Hono } from "hono";
import { afterAll, describe, expect, it, vi } from "vitest";
import { honoRateLimit, withRateLimit } from "../../src/adapters/fetch.js";
import {
  describeNodeRequest,
  fastifyRateLimit,
  guardNodeRequest,
  nodeRateLimit,
  prometheusMetrics,
} from "../../src/adapters/node.js";
import { EdgelimitError } from "../../src/core/errors.js";
import type { RequestDescription } from "../../src/core/types.js";
import { createLimiter } from "../../src/limiter.js";
import { definePolicy } from "../../src/policy/load.js";
import { memoryStore } from "../../src/stores/memory.js";
import { loopbackServers } from "../support/listen.js";
import { withinOneWindow } from "../support/windows.js";

const policy = definePolicy({
  tiers: { anonymous: { global: 5, paths: { "/api/export": 2 } } },
  failClosed: ["/api/admin/"],
});

const listen = loopbackServers();
/** Servers that are not node:http ones (@hono/node-server's), closed after the file too. */
const servers: { close(): unknown }[] = [];
afterAll(async () => {
  for (const server of servers) server.close();
});

/** The behaviour every adapter must show, through a real socket. */
async function expectLimited(base: string) {
  // Minute windows on the real clock: the requests below must not straddle a minute's end.
  await withinOneWindow(60_000, 2_000);
  const seen: string[] = [];
  for (let i = 0; i < 3; i++) {
    const response = await fetch(`${base}/api/export`, {
      headers: { "x-ratelimit-remaining": "999" },
    });
    seen.push(
      `${response.status}:${response.headers.get("x-ratelimit-remaining")}:${await response.text()}`,
    );
  }
  // The origin saw our count, never the forged header value.
  expect(seen[0]).toBe("200:1:origin saw remaining=1");
  expect(seen[1]).toBe("200:0:origin saw remaining=0");
  const [status, , body] = (seen[2] as string).split(/:(.*?):(.*)/s);
  expect(status).toBe("429");
  expect(JSON.parse(body as string).error).toBe("rate_limit_exceeded");
  const blocked = await fetch(`${base}/api/export`);
  expect(blocked.headers.get("retry-after")).toMatch(/^\d+$/);
  expect(blocked.headers.get("cache-control")).toBe("no-store");
  // The global rule: 2 exports admitted + 3 more pages.
  const statuses = [];
  for (let i = 0; i < 4; i++) statuses.push((await fetch(`${base}/home`)).status);
  expect(statuses).toEqual([200, 200, 200, 429]);
}

describe("middleware through real servers", () => {
  it("Express", async () => {
    const limiter = createLimiter({ policy, store: memoryStore() });
    const app = express();
    app.use(nodeRateLimit({ limiter }));
    app.get("/{*path}", (request, response) => {
      response.send(`origin saw remaining=${request.headers["x-ratelimit-remaining"]}`);
    });
    await expectLimited(await listen(createServer(app)));
  });

  it("Express: a per-path limit holds for every casing Express routes to the handler", async () => {
    const limiter = createLimiter({
      policy: definePolicy({ tiers: { anonymous: { paths: { "/api/export": 3 } } } }),
      store: memoryStore(),
    });
    let exports = 0;
    const app = express();
    app.use(nodeRateLimit({ limiter }));
    app.get("/api/export", (_request, response) => {
      exports++;
      response.send("export");
    });
    const base = await listen(createServer(app));
    const statuses: number[] = [];
    for (const path of ["/API/EXPORT", "/Api/Export", "/api/EXPORT"]) {
      for (let i = 0; i < 2; i++) statuses.push((await fetch(`${base}${path}`)).status);
    }
    expect(statuses).toEqual([200, 200, 200, 429, 429, 429]);
    expect(exports).toBe(3);
  });

  it("Express with case sensitive routing: another casing is another route, not counted", async () => {
    const limiter = createLimiter({
      policy: definePolicy({ tiers: { anonymous: { paths: { "/api/export": 2 } } } }),
      store: memoryStore(),
    });
    const app = express();
    app.enable("case sensitive routing");
    app.use(nodeRateLimit({ limiter }));
    app.get("/api/export", (_request, response) => {
      response.send("export");
    });
    const base = await listen(createServer(app));
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) statuses.push((await fetch(`${base}/API/EXPORT`)).status);
    for (let i = 0; i < 3; i++) statuses.push((await fetch(`${base}/api/export`)).status);
    expect(statuses).toEqual([404, 404, 404, 200, 200, 429]);
  });

  it("Express with Prometheus metrics scraped from a separate listener, across a reload", async () => {
    const limiter = createLimiter({ policy, store: memoryStore() });
    const metrics = prometheusMetrics(limiter);
    const app = express();
    app.use(nodeRateLimit({ limiter, metrics }));
    app.get("/{*path}", (_request, response) => {
      response.send("ok");
    });
    const base = await listen(createServer(app));
    // The scrape endpoint on a listener of its own, as an operator would keep it off the public port.
    const admin = await listen(createServer(metrics.handler));

    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) statuses.push((await fetch(`${base}/api/export`)).status);
    for (let i = 0; i < 4; i++) statuses.push((await fetch(`${base}/home`)).status);
    expect(statuses).toEqual([200, 200, 429, 200, 200, 200, 429]);

    const scrape = await fetch(admin);
    expect(scrape.headers.get("content-type")).toContain("text/plain");
    const text = await scrape.text();
    const count = (action: string, rule: string) =>
      Number(
        text
          .split("\n")
          .find(
            (line) =>
              line.startsWith(`edgelimit_decisions_total{action="${action}",`) &&
              line.includes(`rule="${rule}"`),
          )
          ?.split(" ")
          .at(-1),
      );
    expect(count("allow", "anonymous.path./api/export")).toBe(2);
    expect(count("block", "anonymous.path./api/export")).toBe(1);
    expect(count("allow", "anonymous.global")).toBe(3);
    expect(count("block", "anonymous.global")).toBe(1);
    expect(text).toContain("edgelimit_decision_duration_seconds_count 7");
    expect(text).toContain("edgelimit_failed_open_total 0");

    // A reload that moves the export rule: its decisions carry the new path label.
    limiter.reload(
      definePolicy({ tiers: { anonymous: { global: 50, paths: { "/api/exports/": 9 } } } }),
    );
    expect((await fetch(`${base}/api/exports/1`)).status).toBe(200);
    const reloaded = await (await fetch(admin)).text();
    expect(reloaded).toContain(
      'edgelimit_decisions_total{action="allow",reason="within-limit",tier="anonymous",rule="anonymous.path./api/exports/",path="/api/exports/"} 1',
    );
  });

  it("Fastify", async () => {
    const limiter = createLimiter({ policy, store: memoryStore() });
    const app = Fastify();
    app.addHook("onRequest", fastifyRateLimit({ limiter }));
    let routed = 0;
    app.get("/*", async (request) => {
      routed++;
      return `origin saw remaining=${request.headers["x-ratelimit-remaining"]}`;
    });
    await app.listen({ port: 0, host: "127.0.0.1" });
    servers.push({ close: () => app.close() });
    const { port } = app.server.address() as AddressInfo;
    await expectLimited(`http://127.0.0.1:${port}`);
    // 2 exports and 3 pages were admitted; the 4 refused requests never reached the route.
    expect(routed).toBe(5);
  });

  it("node:http", async () => {
    const limiter = createLimiter({ policy, store: memoryStore() });
    const server = createServer(async (request, response) => {
      if (!(await guardNodeRequest({ limiter }, request, response))) return;
      response.end(`origin saw remaining=${request.headers["x-ratelimit-remaining"]}`);
    });
    await expectLimited(await listen(server));
  });

  it("Hono on @hono/node-server", async () => {
    const limiter = createLimiter({ policy, store: memoryStore() });
    const app = new Hono();
    app.use(honoRateLimit({ limiter }));
    app.get("*", (c) => c.text(`origin saw remaining=${c.req.header("x-ratelimit-remaining")}`));
    const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" });
    await once(server, "listening");
    servers.push(server);
    const { port } = server.address() as AddressInfo;
    await expectLimited(`http://127.0.0.1:${port}`);
  });

  it("a plain fetch handler (Deno, Bun, Workers style)", async () => {
    const limiter = createLimiter({ policy, store: memoryStore() });
    const handler = withRateLimit(
      (request: Request) =>
        new Response(`origin saw remaining=${request.headers.get("x-ratelimit-remaining")}`),
      { limiter, ip: () => "203.0.113.9" },
    );
    const server = serve({
      fetch: (request) => handler(request, undefined),
      port: 0,
      hostname: "127.0.0.1",
    });
    await once(server, "listening");
    servers.push(server);
    const { port } = server.address() as AddressInfo;
    await expectLimited(`http://127.0.0.1:${port}`);
  });

  it("withRateLimit without ip is refused when the policy counts clients by address", () => {
    const limiter = createLimiter({ policy, store: memoryStore() });
    let error: unknown;
    try {
      withRateLimit(() => new Response("ok"), { limiter });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(EdgelimitError);
    expect((error as EdgelimitError).code).toBe("EL_BAD_OPTION");
    expect((error as EdgelimitError).docs).toBe("docs/errors.md#el_bad_option");
    expect((error as EdgelimitError).message).toContain("withRateLimit needs the ip option");
    expect((error as EdgelimitError).message).toContain(
      "ip: (req, info) => info.remoteAddr.hostname",
    );
  });

  it("withRateLimit without ip counts clients apart when the policy names a client header", async () => {
    const byHeader = definePolicy({
      identity: { ip: { source: "header", header: "cf-connecting-ip" } },
      tiers: { anonymous: { global: 2 } },
    });
    const limiter = createLimiter({ policy: byHeader, store: memoryStore() });
    const handler = withRateLimit(() => new Response("ok"), { limiter });
    const server = serve({
      fetch: (request) => handler(request, undefined),
      port: 0,
      hostname: "127.0.0.1",
    });
    await once(server, "listening");
    servers.push(server);
    const { port } = server.address() as AddressInfo;
    const statusFor = async (client: string) =>
      (await fetch(`http://127.0.0.1:${port}/`, { headers: { "cf-connecting-ip": client } }))
        .status;
    const first = [];
    for (let i = 0; i < 3; i++) first.push(await statusFor("203.0.113.1"));
    expect(first).toEqual([200, 200, 429]);
    expect(await statusFor("203.0.113.2")).toBe(200);
  });

  it("an ip option that returns no address is counted as ip:unknown and warned about once", async () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    try {
      const limiter = createLimiter({ policy, store: memoryStore() });
      const handler = withRateLimit(() => new Response("ok"), {
        limiter,
        ip: (request: Request) => request.headers.get("x-test-peer") ?? undefined,
      });
      const server = serve({
        fetch: (request) => handler(request, undefined),
        port: 0,
        hostname: "127.0.0.1",
      });
      await once(server, "listening");
      servers.push(server);
      const { port } = server.address() as AddressInfo;
      const statusFor = async (peer: string) =>
        (await fetch(`http://127.0.0.1:${port}/home`, { headers: { "x-test-peer": peer } })).status;
      // Two different garbage values share the one ip:unknown counter (global: 5).
      const statuses = [];
      for (let i = 0; i < 6; i++) statuses.push(await statusFor(i % 2 === 0 ? "peer-a" : "peer-b"));
      expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
      expect(await statusFor("203.0.113.9")).toBe(200);
      expect(warn).toHaveBeenCalledTimes(1);
      expect(String(warn.mock.calls[0]?.[0])).toContain(
        'the client address is "peer-a", not an IP address; 1 request since the last warning counted together as ip:unknown',
      );
    } finally {
      warn.mockRestore();
    }
  });

  it("describes a Node request as the gateway does: the socket peer, the path as sent, lower-case names", async () => {
    let described: RequestDescription | undefined;
    const base = await listen(
      createServer((request, response) => {
        described = describeNodeRequest(request);
        response.end();
      }),
    );
    await fetch(`${base}/api/a?q=1`, { headers: { "X-Custom": "1" } });
    expect(described).toMatchObject({
      ip: "127.0.0.1",
      method: "GET",
      path: "/api/a?q=1",
      lowerCaseHeaders: true,
    });
    expect((described?.headers as Record<string, string> | undefined)?.["x-custom"]).toBe("1");
  });

  it("answers 503 on a fail-closed path when the store is down", async () => {
    const limiter = createLimiter({
      policy,
      store: { name: "down", apply: () => Promise.reject(new Error("down")) },
    });
    const app = express();
    app.use(nodeRateLimit({ limiter }));
    app.get("/{*path}", (_request, response) => response.send("ok"));
    const base = await listen(createServer(app));
    expect((await fetch(`${base}/api/admin/users`)).status).toBe(503);
    expect((await fetch(`${base}/home`)).status).toBe(200);
  });
});
