import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HOUR_MS, withinOneWindow } from "../support/windows.js";
import { type RlsProcess, startRls } from "./harness.js";

/**
 * `/check/PROXY` called directly, as a proxy that passes on every header of its client would:
 * each path believes only the headers its proxy sets itself (docs/forward-auth.md), whatever else
 * the request carries. The proxies themselves, with the examples' configurations, are in
 * proxies.test.ts and forged-headers.test.ts.
 */

const dir = mkdtempSync(join(tmpdir(), "edgelimit-forward-auth-"));
let rls: RlsProcess;
let base: string;

beforeAll(async () => {
  // Hour windows: a test waits for a fresh window only in an hour's last 5 s, not every minute's.
  const policy = join(dir, "policy.yaml");
  writeFileSync(
    policy,
    `version: 1
identity:
  ip: { source: x-forwarded-for, trustedProxies: [127.0.0.0/8, "::1/128"] }
defaults:
  window: 1h
tiers:
  anonymous:
    global: 100
    paths:
      /api/: 2
namespaces:
  login:
    match: { path: /login, methods: [POST] }
    key: ip
    limit: 1
    window: 1h
`,
  );
  rls = await startRls(["--policy", policy]);
  base = `http://127.0.0.1:${rls.httpPort}`;
});

afterAll(async () => {
  await rls?.stop();
  rmSync(dir, { recursive: true, force: true });
});

interface Answer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
}

/** One call; header values given as arrays go out as that many header lines. */
function call(path: string, headers: Record<string, string | string[]>): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const outgoing = request(`${base}${path}`, { headers, agent: false }, (response) => {
      let body = "";
      response.setEncoding("utf8");
      response.on("data", (chunk: string) => {
        body += chunk;
      });
      response.on("end", () =>
        resolve({ status: response.statusCode ?? 0, headers: response.headers, body }),
      );
    });
    outgoing.on("error", reject);
    outgoing.end();
  });
}

const NGINX = { method: "x-original-method", uri: "x-original-uri" };
const OTHERS = { method: "x-forwarded-method", uri: "x-forwarded-uri" };
const PROXIES = [
  { proxy: "nginx", own: NGINX, other: OTHERS, refused: 403 },
  { proxy: "caddy", own: OTHERS, other: NGINX, refused: 429 },
  { proxy: "traefik", own: OTHERS, other: NGINX, refused: 429 },
  { proxy: "haproxy", own: OTHERS, other: NGINX, refused: 429 },
] as const;

describe.each(PROXIES.map((entry, index) => ({ ...entry, index })))(
  "/check/$proxy",
  ({ proxy, own, other, refused, index }) => {
    /** What the proxy says, and what a client wrote beside it in every other header. */
    const described = (method: string, uri: string, client: string) => ({
      [own.method]: method,
      [own.uri]: uri,
      "x-forwarded-for": client,
      [other.method]: method === "POST" ? "GET" : "POST",
      [other.uri]: "/public",
      "x-real-ip": "192.0.2.99",
      forwarded: "for=192.0.2.99;host=elsewhere.example",
      "x-forwarded-host": "elsewhere.example",
    });

    it("counts the path its proxy's own header names, whatever the other headers say", async () => {
      await withinOneWindow(HOUR_MS, 5_000);
      const client = `198.51.100.${10 + index}`;
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++) {
        statuses.push((await call(`/check/${proxy}`, described("GET", "/api/x", client))).status);
      }
      expect(statuses).toEqual([200, 200, refused]);
    });

    it("counts the method its proxy's own header names (a POST-only limit holds)", async () => {
      await withinOneWindow(HOUR_MS, 5_000);
      const client = `198.51.100.${20 + index}`;
      const statuses: number[] = [];
      for (let i = 0; i < 2; i++) {
        statuses.push((await call(`/check/${proxy}`, described("POST", "/login", client))).status);
      }
      expect(statuses).toEqual([200, refused]);
    });

    it("answers 500, naming what to set, when a header it reads is missing or sent twice", async () => {
      const complete = described("GET", "/api/y", "198.51.100.30");
      for (const header of [own.method, own.uri, "x-forwarded-for"]) {
        const { [header]: _left, ...without } = complete;
        const answer = await call(`/check/${proxy}`, without);
        expect(answer.status).toBe(500);
        expect(answer.body).toContain(`${header} missing`);
      }
      const twice = await call(`/check/${proxy}`, {
        ...complete,
        [own.uri]: ["/api/y", "/public"],
      });
      expect(twice.status).toBe(500);
      expect(twice.body).toContain(`${own.uri} sent more than once`);
    });
  },
);

describe("/check without a proxy it knows", () => {
  it("answers 503, which every proxy configuration refuses, naming the four paths, for /check itself and any other name", async () => {
    const headers = {
      "x-forwarded-uri": "/api/z",
      "x-original-uri": "/api/z",
      "x-forwarded-for": "198.51.100.40",
    };
    for (const path of ["/check", "/check/", "/check/envoy", "/check/constructor"]) {
      const answer = await call(path, headers);
      expect(answer.status, path).toBe(503);
      expect(answer.headers["x-edgelimit-action"], path).toBe("unavailable");
      expect(answer.body).toContain("/check/nginx, /check/caddy, /check/traefik, /check/haproxy");
    }
  });

  it("logs each refusal once, not once a request", async () => {
    for (let i = 0; i < 3; i++) await call("/check/caddy", { "x-forwarded-for": "198.51.100.41" });
    const logged = rls
      .logLines()
      .filter(
        (line) =>
          line.msg === "forward-auth refused (logged once)" &&
          String(line.problem).startsWith("/check/caddy") &&
          String(line.problem).includes("x-forwarded-method, x-forwarded-uri missing"),
      );
    expect(logged).toHaveLength(1);
  });
});

describe("the client behind /check", () => {
  it("is X-Forwarded-For walked over the trusted proxies; X-Real-IP and Forwarded name nobody", async () => {
    await withinOneWindow(HOUR_MS, 5_000);
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) {
      const answer = await call("/check/caddy", {
        "x-forwarded-method": "GET",
        "x-forwarded-uri": "/api/real",
        // All loopback, all trusted: the client is the leftmost, the same on every call.
        "x-forwarded-for": "198.51.100.50, 127.0.0.1",
        "x-real-ip": `192.0.2.${i + 1}`,
        forwarded: `for=192.0.2.${i + 1}`,
      });
      statuses.push(answer.status);
    }
    expect(statuses).toEqual([200, 200, 429]);
  });
});
