import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { withinOneWindow } from "../support/windows.js";
import { grpcJsClient, type RlsClient, type RlsProcess, startRls } from "./harness.js";

/**
 * One `edgelimit rls --config --policy` process: `POST /json` and `GET /healthcheck` as
 * envoyproxy/ratelimit answers them, forward-auth at `/check/PROXY` (forward-auth.test.ts has
 * which headers each proxy's path believes), gRPC calls of a domain the
 * configuration does not name decided by the policy, and the admin listener.
 */

let rls: RlsProcess;
let http: string;
let client: RlsClient;

beforeAll(async () => {
  rls = await startRls([
    "--config",
    "test/rls/fixtures/small.yaml",
    "--policy",
    "test/rls/fixtures/policy.yaml",
  ]);
  http = `http://127.0.0.1:${rls.httpPort}`;
  client = grpcJsClient(rls.grpcPort);
});

afterAll(async () => {
  client?.close();
  // A clean stop: SIGTERM drains and exits 0.
  expect(await rls?.stop()).toBe(0);
});

const json = (body: unknown) =>
  fetch(`${http}/json`, {
    method: "POST",
    body: typeof body === "string" ? body : JSON.stringify(body),
  });

describe("POST /json and GET /healthcheck", () => {
  it("answers 200 for OK and 429 for OVER_LIMIT, with the response in protobuf's JSON mapping", async () => {
    await withinOneWindow(3_600_000, 20_000);
    const request = {
      domain: "small",
      descriptors: [{ entries: [{ key: "client", value: "json-1" }] }],
    };
    const first = await json(request);
    expect(first.status).toBe(200);
    expect(await first.json()).toEqual({
      overallCode: "OK",
      statuses: [
        {
          code: "OK",
          currentLimit: { requestsPerUnit: 1, unit: "HOUR" },
          durationUntilReset: expect.stringMatching(/^\d+(\.\d+)?s$/),
        },
      ],
    });
    const second = await json(request);
    expect(second.status).toBe(429);
    const body = (await second.json()) as Record<string, unknown>;
    expect(body.overallCode).toBe("OVER_LIMIT");
    expect(body.responseHeadersToAdd).toEqual([
      { key: "retry-after", value: expect.stringMatching(/^\d+$/) },
    ]);
  });

  it("reads the proto names and the JSON names alike", async () => {
    const response = await json({
      domain: "small",
      descriptors: [{ entries: [{ key: "client", value: "json-2" }], hits_addend: "0" }],
    });
    expect(response.status).toBe(200);
    expect(
      ((await response.json()) as { statuses: { limitRemaining: number }[] }).statuses[0]
        ?.limitRemaining,
    ).toBe(1);
  });

  it("refuses what is not a RateLimitRequest with 400, and other methods with 405", async () => {
    expect((await json("{not json")).status).toBe(400);
    const unknown = await json({ domain: "small", descriptors: [], surprise: 1 });
    expect(unknown.status).toBe(400);
    expect(unknown.headers.get("content-type")).toBe("application/json");
    const refusal = (await unknown.json()) as { error: string; message: string };
    expect(refusal.error).toBe("invalid_request");
    expect(refusal.message).toContain('unknown field "surprise"');
    expect((await json({ domain: "small", descriptors: [] })).status).toBe(400);
    expect((await fetch(`${http}/json`)).status).toBe(405);
  });

  it("says OK on /healthcheck", async () => {
    const response = await fetch(`${http}/healthcheck`);
    expect(response.status).toBe(200);
    expect(await response.text()).toBe("OK");
  });
});

describe("forward-auth at /check/PROXY, with the policy", () => {
  /** As Caddy asks (the answer as it is), or as nginx does (refusals as 403 and 401). */
  const check = (path: string, client: string, proxy: "caddy" | "nginx" = "caddy") =>
    fetch(`${http}/check/${proxy}`, {
      headers:
        proxy === "nginx"
          ? { "x-original-uri": path, "x-original-method": "GET", "x-forwarded-for": client }
          : { "x-forwarded-uri": path, "x-forwarded-method": "GET", "x-forwarded-for": client },
      redirect: "manual",
    });

  it("answers 200 with the rate-limit headers, then 429 with Retry-After and the JSON body", async () => {
    await withinOneWindow(60_000, 5_000);
    const first = await check("/api/items", "198.51.100.1");
    expect(first.status).toBe(200);
    expect(first.headers.get("x-ratelimit-limit")).toBe("2");
    expect(first.headers.get("x-ratelimit-remaining")).toBe("1");
    expect(first.headers.get("x-edgelimit-action")).toBe("allow");
    expect((await check("/api/items", "198.51.100.1")).status).toBe(200);
    const refused = await check("/api/items", "198.51.100.1");
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(await refused.json()).toMatchObject({ error: "rate_limit_exceeded" });
    const forNginx = await check("/api/items", "198.51.100.1", "nginx");
    expect(forNginx.status).toBe(403);
    expect(forNginx.headers.get("x-edgelimit-action")).toBe("block");
  });

  it("sends a challenge as 302 to the challenge page (401 to nginx), which it serves", async () => {
    await withinOneWindow(60_000, 5_000);
    for (let i = 0; i < 3; i++) expect((await check("/app/page", "198.51.100.2")).status).toBe(200);
    const challenged = await check("/app/page?x=1", "198.51.100.2");
    expect(challenged.status).toBe(302);
    const location = challenged.headers.get("location") ?? "";
    expect(location).toBe(`/captcha?redirect=${encodeURIComponent("/app/page?x=1")}`);
    const forNginx = await check("/app/page", "198.51.100.2", "nginx");
    expect(forNginx.status).toBe(401);
    expect(forNginx.headers.get("location")).toBe(
      `/captcha?redirect=${encodeURIComponent("/app/page")}`,
    );
    const page = await fetch(`${http}${location}`, {
      headers: { "x-forwarded-for": "198.51.100.2" },
    });
    expect(page.status).toBe(200);
    expect(await page.text()).toContain("<html");
  });
});

describe("gRPC calls of a domain the configuration does not name", () => {
  it("are decided by the policy, with the client from remote_address and the path from :path", async () => {
    await withinOneWindow(60_000, 5_000);
    const call = (path: string) =>
      client.shouldRateLimit({
        domain: "edge",
        descriptors: [
          { entries: [{ key: "remote_address", value: "192.0.2.77" }] },
          {
            entries: [
              { key: "remote_address", value: "192.0.2.77" },
              { key: ":path", value: path },
              // A client-written header is never the client's address.
              { key: "x-forwarded-for", value: "192.0.2.99" },
            ],
          },
        ],
      });
    const first = await call("/api/grpc");
    expect(first.overall_code).toBe("OK");
    expect(
      first.statuses?.map((status) => [
        status.code,
        status.current_limit?.name,
        status.limit_remaining,
      ]),
    ).toEqual([
      ["OK", "anonymous.path./api/", 1],
      ["OK", "anonymous.path./api/", 1],
    ]);
    expect(first.statuses?.[0]?.current_limit?.unit).toBe("MINUTE");
    expect(first.request_headers_to_add).toEqual({ "x-ratelimit-remaining": "1" });
    await call("/api/grpc");
    const refused = await call("/api/grpc");
    expect(refused.overall_code).toBe("OVER_LIMIT");
    expect(Number(refused.response_headers_to_add?.["retry-after"])).toBeGreaterThanOrEqual(1);
    // Another address is another client.
    const other = await client.shouldRateLimit({
      domain: "edge",
      descriptors: [
        {
          entries: [
            { key: "remote_address", value: "192.0.2.78" },
            { key: ":path", value: "/api/grpc" },
          ],
        },
      ],
    });
    expect(other.overall_code).toBe("OK");
  });
});

describe("the admin listener (127.0.0.1)", () => {
  it("serves /healthz, /metrics and the dashboard's snapshot with the descriptors", async () => {
    const health = (await (await fetch(`${rls.adminUrl}healthz`)).json()) as { status: string };
    expect(health.status).toBe("ok");
    const metrics = await (await fetch(`${rls.adminUrl}metrics`)).text();
    expect(metrics).toMatch(/edgelimit_rls_calls_total\{api="json",code="200"\} \d+/);
    expect(metrics).toMatch(
      /edgelimit_decisions_total\{action="block",reason="over-limit",tier="anonymous",rule="small.client"/,
    );
    const snapshot = (await (await fetch(`${rls.adminUrl}api/snapshot`)).json()) as {
      policy: { rules: { id: string }[] };
      totals: Record<string, number>;
      overrides: unknown;
    };
    // Its policy's rules take the store's overrides (memory here: none set); the dashboard
    // lists them, /metrics counts them (docs/overrides.md).
    expect(snapshot.overrides).toEqual({ kept: true, active: 0, shown: [] });
    expect(metrics).toMatch(/^edgelimit_overrides_active 0$/m);
    expect(snapshot.policy.rules.map((rule) => rule.id)).toContain("small.client");
    expect(snapshot.policy.rules.map((rule) => rule.id)).toContain("anonymous.global");
    expect(snapshot.totals.block).toBeGreaterThan(0);
    expect((await fetch(`${rls.adminUrl}`)).status).toBe(200);
  });
});
