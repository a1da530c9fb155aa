import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  buildWorker,
  type Runtime,
  scratch,
  startRuntime,
  tally,
  tokenFor,
  withinOneWindow,
} from "./harness.js";

const MINUTE = 60_000;

/** examples/policies/workers.yaml, built as `npm run build:cloudflare` builds it, in workerd. */
describe("the workers.yaml Worker in workerd", () => {
  let runtime: Runtime;
  let cleanup: () => Promise<void> = async () => {};

  beforeAll(async () => {
    const folder = await scratch();
    cleanup = folder.cleanup;
    const script = await buildWorker(folder.dir, "examples/policies/workers.yaml");
    runtime = await startRuntime(script, `${folder.dir}/objects`);
    // Every test below needs its requests to land in one 60 s window of the binding (whose
    // periods are 10 or 60 s: no longer window here). They take 1-2 s in all; 10 s leaves room
    // for a busy machine.
    await withinOneWindow(MINUTE, 10_000);
  }, 60_000);

  afterAll(async () => {
    await runtime?.miniflare.dispose();
    await cleanup();
  });

  const login = (ip: string) => runtime.dispatch("/login", { method: "POST", ip });

  it("blocks login brute force from one IP after 5 in 60 s, and not another IP", async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) statuses.push((await login("198.51.100.10")).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429, 429]);
    expect((await login("198.51.100.11")).status).toBe(200);
    // GET /login is not the login operation (methods: [POST]) and /login is not under /api/.
    expect((await runtime.dispatch("/login", { ip: "198.51.100.10" })).status).toBe(200);
  });

  it("answers the login 429 with Retry-After and no-store, and discloses nothing more", async () => {
    for (let i = 0; i < 5; i++) await login("198.51.100.20");
    const refused = await login("198.51.100.20");
    expect(refused.status).toBe(429);
    const retryAfter = Number(refused.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(refused.headers.get("cache-control")).toBe("no-store");
    const rateLimitHeaders = [...refused.headers.keys()].filter((name) =>
      name.includes("ratelimit"),
    );
    expect(rateLimitHeaders).toEqual([]);
    expect(JSON.parse(refused.body)).toEqual({
      error: "rate_limit_exceeded",
      message: `Too many requests. Try again in ${retryAfter} second${retryAfter === 1 ? "" : "s"}.`,
      retry_after: retryAfter,
    });
  });

  it("limits the API to 100 per 60 s per IP, without a remaining count from the binding", async () => {
    const statuses: number[] = [];
    let first: Awaited<ReturnType<Runtime["dispatch"]>> | undefined;
    for (let i = 0; i < 101; i++) {
      const response = await runtime.dispatch(`/api/items/${i}`, { ip: "203.0.113.30" });
      first ??= response;
      statuses.push(response.status);
    }
    expect(tally(statuses)).toEqual({ 200: 100, 429: 1 });
    expect(statuses.at(-1)).toBe(429);
    // The binding only says yes or no: no remaining count to the client or to the origin.
    expect(first?.headers.get("x-ratelimit-limit")).toBe("100");
    expect(first?.headers.get("x-ratelimit-remaining")).toBeNull();
    expect(first?.headers.get("ratelimit")).toBeNull();
    expect(JSON.parse(first?.body ?? "{}").remaining).toBeNull();
    // Another IP has its own count.
    expect((await runtime.dispatch("/api/items", { ip: "203.0.113.31" })).status).toBe(200);
  });

  it("limits the API per verified user, whatever IP the user comes from", async () => {
    const token = await tokenFor("u_roaming", "pro");
    const statuses: number[] = [];
    for (let i = 0; i < 101; i++) {
      const response = await runtime.dispatch("/api/things", {
        ip: `203.0.113.${100 + (i % 50)}`,
        headers: { authorization: `Bearer ${token}` },
      });
      statuses.push(response.status);
    }
    expect(tally(statuses)).toEqual({ 200: 100, 429: 1 });
    // The IPs the user used were never counted: an anonymous client on one of them passes.
    expect((await runtime.dispatch("/api/things", { ip: "203.0.113.100" })).status).toBe(200);
  });

  it("keys only on CF-Connecting-IP: X-Forwarded-For, X-Real-IP and x-user-id change nothing", async () => {
    for (let i = 0; i < 5; i++) await login("192.0.2.40");
    for (let i = 0; i < 5; i++) {
      const forged = await runtime.dispatch("/login", {
        method: "POST",
        ip: "192.0.2.40",
        headers: {
          "x-forwarded-for": `10.9.8.${i}`,
          "x-real-ip": `10.9.7.${i}`,
          "x-user-id": `user-${i}`,
          "true-client-ip": `10.9.6.${i}`,
        },
      });
      expect(forged.status).toBe(429);
    }
    // A token that does not verify buys no user identity: still counted by IP.
    const forgedToken = `${(await tokenFor("u_forged", "enterprise")).slice(0, -4)}AAAA`;
    const withBadToken = await runtime.dispatch("/login", {
      method: "POST",
      ip: "192.0.2.40",
      headers: { authorization: `Bearer ${forgedToken}` },
    });
    expect(withBadToken.status).toBe(429);
    // The same headers from a fresh CF-Connecting-IP are a fresh client.
    expect((await login("192.0.2.41")).status).toBe(200);
  });

  it("does not let a client write the origin's remaining-count header", async () => {
    const token = await tokenFor("u_header", "free");
    const response = await runtime.dispatch("/api/echo", {
      ip: "203.0.113.60",
      headers: { authorization: `Bearer ${token}`, "x-ratelimit-remaining": "999999" },
    });
    expect(response.status).toBe(200);
    expect(JSON.parse(response.body).remaining).toBe("49");
    expect(response.headers.get("x-ratelimit-remaining")).toBe("49");
    expect(response.headers.get("x-ratelimit-limit")).toBe("50");
  });

  it("holds the free plan's daily quota to exactly 50 under 200 concurrent requests", async () => {
    const token = await tokenFor("u_concurrent", "free");
    const responses = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        runtime.dispatch(`/api/burst/${i}`, {
          ip: "203.0.113.70",
          headers: { authorization: `Bearer ${token}` },
        }),
      ),
    );
    expect(tally(responses.map((response) => response.status))).toEqual({ 200: 50, 429: 150 });
    const remaining = responses
      .filter((response) => response.status === 200)
      .map((response) => Number(response.headers.get("x-ratelimit-remaining")))
      .sort((a, b) => a - b);
    expect(remaining).toEqual(Array.from({ length: 50 }, (_, i) => i));
    for (const refused of responses.filter((response) => response.status === 429)) {
      expect(refused.headers.get("cache-control")).toBe("no-store");
      expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    }
    // The quota is per user: another free user is untouched.
    const other = await runtime.dispatch("/api/burst", {
      ip: "203.0.113.70",
      headers: { authorization: `Bearer ${await tokenFor("u_other", "free")}` },
    });
    expect(other.status).toBe(200);
  });
});
