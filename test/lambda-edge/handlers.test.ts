import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type CloudFrontRequest,
  type CloudFrontRequestEvent,
  type CloudFrontResponseEvent,
  type CloudFrontResultResponse,
  createViewerRequestHandler,
  createViewerResponseHandler,
} from "../../src/adapters/lambda-edge/index.js";
import { definePolicy, loadPolicy } from "../../src/policy/load.js";
import { DynamoDbStore } from "../../src/stores/dynamodb.js";
import {
  createRateLimitTable,
  type LocalDynamo,
  startDynalite,
  TEST_CREDENTIALS,
} from "../dynamodb/harness.js";

const SECRET = "test-secret-for-hs256-at-least-32-bytes!";
const env = { EDGELIMIT_JWT_SECRET: SECRET };
// A loopback dynalite on a shared 2-core machine can miss the seed's 50 ms budget; the budget
// itself is tested at the end with a server that never answers.
const seedPolicy = loadPolicy("examples/policies/cloudfront.yaml");
const policy = { ...seedPolicy, budgetMs: 5_000 };
// Mid-window, so that counts never straddle a minute boundary during a test.
const T0 = Date.UTC(2026, 1, 14, 14, 30, 5);

/** AWS's documented viewer-request event, with the fields a test varies. */
function viewerRequest(
  clientIp: string,
  uri: string,
  extraHeaders: CloudFrontRequest["headers"] = {},
  querystring = "",
): CloudFrontRequestEvent {
  return {
    Records: [
      {
        cf: {
          config: {
            distributionDomainName: "d111111abcdef8.cloudfront.net",
            distributionId: "EDFDVBD6EXAMPLE",
            eventType: "viewer-request",
            requestId: "4TyzHTaYWb1GX1qTfsHhEqV6HUDd_BzoBZnwfnvQc_1oF26ClkoUSEQ==",
          },
          request: {
            clientIp,
            headers: {
              host: [{ key: "Host", value: "d111111abcdef8.cloudfront.net" }],
              "user-agent": [{ key: "User-Agent", value: "curl/7.66.0" }],
              accept: [{ key: "accept", value: "*/*" }],
              ...extraHeaders,
            },
            method: "GET",
            querystring,
            uri,
          },
        },
      },
    ],
  };
}

/** AWS's documented viewer-response event around the request the viewer-request step forwarded. */
function viewerResponse(request: CloudFrontRequest): CloudFrontResponseEvent {
  return {
    Records: [
      {
        cf: {
          config: {
            distributionDomainName: "d111111abcdef8.cloudfront.net",
            distributionId: "EDFDVBD6EXAMPLE",
            eventType: "viewer-response",
            requestId: "4TyzHTaYWb1GX1qTfsHhEqV6HUDd_BzoBZnwfnvQc_1oF26ClkoUSEQ==",
          },
          request,
          response: {
            headers: {
              "content-type": [{ key: "Content-Type", value: "text/html; charset=UTF-8" }],
              date: [{ key: "Date", value: "Mon, 13 Jan 2020 20:14:56 GMT" }],
              server: [{ key: "Server", value: "gws" }],
            },
            status: "200",
            statusDescription: "OK",
          },
        },
      },
    ],
  };
}

function isResult(
  value: CloudFrontRequest | CloudFrontResultResponse,
): value is CloudFrontResultResponse {
  return !("clientIp" in value);
}

let dynamo: LocalDynamo;
const closers: (() => Promise<void>)[] = [];
let tables = 0;

async function storeOnFreshTable(endpoint?: string): Promise<DynamoDbStore> {
  const table = `edge-${++tables}`;
  if (endpoint === undefined) await createRateLimitTable(dynamo.client, table);
  const store = new DynamoDbStore({
    table,
    region: "us-east-1",
    endpoint: endpoint ?? dynamo.endpoint,
    credentials: TEST_CREDENTIALS,
  });
  closers.push(() => store.close());
  return store;
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  closers.push(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

beforeAll(async () => {
  dynamo = await startDynalite();
});

afterAll(async () => {
  for (const close of closers.reverse()) await close().catch(() => undefined);
  await dynamo?.close();
});

describe("viewer-request and viewer-response handlers", () => {
  it("forwards allowed requests with the remaining count and answers the sixth report with a CloudFront 429", async () => {
    const handler = createViewerRequestHandler({
      policy,
      store: await storeOnFreshTable(),
      env,
      clock: () => T0,
      metrics: false,
    });
    const forwarded: CloudFrontRequest[] = [];
    for (let i = 0; i < 5; i++) {
      const result = await handler(viewerRequest("203.0.113.178", "/api/reports/q1"));
      if (isResult(result)) throw new Error(`request ${i} refused: ${result.status}`);
      forwarded.push(result);
    }
    expect(
      forwarded.map((request) => request.headers["x-ratelimit-remaining"]?.[0]?.value),
    ).toEqual(["4", "3", "2", "1", "0"]);
    expect(forwarded[0]?.headers["x-ratelimit-remaining"]?.[0]?.key).toBe("X-RateLimit-Remaining");

    const refused = await handler(viewerRequest("203.0.113.178", "/api/reports/q1"));
    expect(isResult(refused)).toBe(true);
    const result = refused as CloudFrontResultResponse;
    expect(result.status).toBe("429");
    expect(result.statusDescription).toBe("Too Many Requests");
    const retryAfter = Number(result.headers?.["retry-after"]?.[0]?.value);
    expect(retryAfter).toBe(55);
    expect(result.headers?.["cache-control"]).toEqual([
      { key: "Cache-Control", value: "no-store" },
    ]);
    expect(result.headers?.["x-ratelimit-limit"]?.[0]).toEqual({
      key: "X-RateLimit-Limit",
      value: "5",
    });
    expect(JSON.parse(result.body ?? "")).toMatchObject({
      error: "rate_limit_exceeded",
      retry_after: 55,
    });
  });

  it("hands the rate-limit headers to the viewer-response step, and ignores what a client forged", async () => {
    const handler = createViewerRequestHandler({
      policy,
      store: await storeOnFreshTable(),
      env,
      clock: () => T0,
      metrics: false,
    });
    const forged = {
      "x-edgelimit-response-headers": [
        { key: "X-Edgelimit-Response-Headers", value: '{"set-cookie":"admin=1"}' },
      ],
      "x-ratelimit-remaining": [{ key: "X-RateLimit-Remaining", value: "999999" }],
    };
    const forwarded = await handler(viewerRequest("198.51.100.20", "/api/search", forged));
    if (isResult(forwarded)) throw new Error("refused");
    expect(forwarded.headers["x-ratelimit-remaining"]?.[0]?.value).toBe("29");
    const response = await createViewerResponseHandler()(viewerResponse(forwarded));
    expect(response.status).toBe("200");
    expect(response.headers["x-ratelimit-limit"]).toEqual([
      { key: "X-RateLimit-Limit", value: "30" },
    ]);
    expect(response.headers["x-ratelimit-remaining"]).toEqual([
      { key: "X-RateLimit-Remaining", value: "29" },
    ]);
    expect(response.headers["x-ratelimit-reset"]?.[0]?.value).toBe(
      String(Math.ceil((Math.floor(T0 / 60_000) + 1) * 60)),
    );
    expect(response.headers.ratelimit?.[0]?.value).toMatch(/;r=29;t=55$/);
    expect(response.headers["set-cookie"]).toBeUndefined();
    expect(response.headers.server).toEqual([{ key: "Server", value: "gws" }]);

    // A response event whose request carries a forged handover gains nothing but allowed names.
    const direct = await createViewerResponseHandler()(
      viewerResponse(
        (
          viewerRequest("192.0.2.1", "/", forged)
            .Records[0] as CloudFrontRequestEvent["Records"][number]
        ).cf.request,
      ),
    );
    expect(direct.headers["set-cookie"]).toBeUndefined();
  });

  it("counts a verified JWT's user by id and a forged one by IP", async () => {
    const handler = createViewerRequestHandler({
      policy,
      store: await storeOnFreshTable(),
      env,
      clock: () => T0,
      metrics: false,
    });
    const token = await new SignJWT({ plan: "pro" })
      .setProtectedHeader({ alg: "HS256" })
      .setSubject("u_abc")
      .setExpirationTime(Math.floor(T0 / 1000) + 3600)
      .sign(new TextEncoder().encode(SECRET));
    const bearer = (value: string) => ({
      authorization: [{ key: "Authorization", value: `Bearer ${value}` }],
    });
    // /api/export: 20 for users, 3 for anonymous clients.
    const verified = await handler(viewerRequest("203.0.113.5", "/api/export", bearer(token)));
    if (isResult(verified)) throw new Error("refused");
    expect(verified.headers["x-ratelimit-remaining"]?.[0]?.value).toBe("19");
    const forged = `${token.slice(0, -4)}AAAA`;
    const anonymous = await handler(viewerRequest("203.0.113.5", "/api/export", bearer(forged)));
    if (isResult(anonymous)) throw new Error("refused");
    expect(anonymous.headers["x-ratelimit-remaining"]?.[0]?.value).toBe("2");
  });

  it("challenges an anonymous client over 60/min with a 302 and blocks it past twice the limit", async () => {
    const handler = createViewerRequestHandler({
      policy,
      store: await storeOnFreshTable(),
      env,
      clock: () => T0,
      metrics: false,
    });
    const statuses: string[] = [];
    for (let i = 0; i < 125; i++) {
      const result = await handler(viewerRequest("192.0.2.77", "/products/42", {}, "page=2"));
      statuses.push(isResult(result) ? result.status : "forwarded");
      if (i === 60 && isResult(result)) {
        expect(result.headers?.location).toEqual([
          {
            key: "Location",
            value: `/captcha?redirect=${encodeURIComponent("/products/42?page=2")}`,
          },
        ]);
      }
    }
    expect(statuses.filter((status) => status === "forwarded").length).toBe(60);
    expect(statuses.slice(60, 119).every((status) => status === "302")).toBe(true);
    expect(statuses.slice(120).every((status) => status === "429")).toBe(true);
  });

  it("admits exactly 100 of 500 concurrent invocations spread over five function instances", async () => {
    const strict = definePolicy({
      version: 1,
      budget: "10s",
      tiers: { anonymous: { global: 100 } },
    });
    const table = await storeOnFreshTable();
    const handlers = Array.from({ length: 5 }, () =>
      createViewerRequestHandler({
        policy: strict,
        store: new DynamoDbStore({
          table: table.table,
          region: "us-east-1",
          endpoint: dynamo.endpoint,
          credentials: TEST_CREDENTIALS,
        }),
        clock: () => T0,
        metrics: false,
      }),
    );
    for (const handler of handlers)
      closers.push(() => handler.limiter.store.close?.() ?? Promise.resolve());
    const results = await Promise.all(
      Array.from({ length: 500 }, (_, i) =>
        (handlers[i % 5] as (typeof handlers)[number])(viewerRequest("203.0.113.200", "/")),
      ),
    );
    expect(results.filter((result) => !isResult(result)).length).toBe(100);
    expect(results.filter((result) => isResult(result) && result.status === "429").length).toBe(
      400,
    );
  });

  it("writes one CloudWatch EMF line per decision, by tier and path", async () => {
    const lines: string[] = [];
    const handler = createViewerRequestHandler({
      policy,
      store: await storeOnFreshTable(),
      env,
      clock: () => T0,
      metrics: { write: (line) => lines.push(line) },
    });
    for (let i = 0; i < 4; i++) await handler(viewerRequest("203.0.113.9", "/api/export/csv"));
    expect(lines).toHaveLength(4);
    const last = JSON.parse(lines[3] as string);
    expect(last._aws.CloudWatchMetrics).toEqual([
      {
        Namespace: "edgelimit",
        Dimensions: [["Tier", "Path"]],
        Metrics: [{ Name: "Blocked", Unit: "Count" }],
      },
    ]);
    expect(last).toMatchObject({ Tier: "anonymous", Path: "/api/export", Blocked: 1 });
    expect(JSON.parse(lines[0] as string)).toMatchObject({ Allowed: 1, Path: "/api/export" });
  });
});

describe("fail modes when DynamoDB is down or throttling", () => {
  async function closedPort(): Promise<string> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as AddressInfo).port;
    await new Promise<void>((resolve) => server.close(() => resolve()));
    return `http://127.0.0.1:${port}`;
  }

  async function throttlingEndpoint(
    type: string,
  ): Promise<{ endpoint: string; hits: () => number }> {
    let hits = 0;
    const server = createServer((request, response) => {
      hits++;
      request.resume();
      response.writeHead(400, { "content-type": "application/x-amz-json-1.0" });
      response.end(
        JSON.stringify({
          __type: `com.amazonaws.dynamodb.v20120810#${type}`,
          message: "Rate of requests exceeds the allowed throughput.",
        }),
      );
    });
    return { endpoint: await listen(server), hits: () => hits };
  }

  async function expectModes(endpoint: string): Promise<void> {
    const outcomes: string[] = [];
    const handler = createViewerRequestHandler({
      policy: seedPolicy,
      store: await storeOnFreshTable(endpoint),
      env,
      clock: () => T0,
      metrics: { write: (line) => outcomes.push(JSON.parse(line).reason) },
    });
    const local = await handler(viewerRequest("203.0.113.1", "/api/search"));
    expect(isResult(local)).toBe(false);
    const closed = await handler(viewerRequest("203.0.113.1", "/api/admin/users"));
    expect(isResult(closed)).toBe(true);
    const result = closed as CloudFrontResultResponse;
    expect(result.status).toBe("503");
    expect(result.headers?.["retry-after"]?.[0]?.value).toMatch(/^\d+$/);
    expect(JSON.parse(result.body ?? "").error).toBe("rate_limit_unavailable");
    const billing = await handler(viewerRequest("203.0.113.1", "/api/billing/invoices"));
    expect((billing as CloudFrontResultResponse).status).toBe("503");
    expect(outcomes).toEqual(["store-failed-local", "store-failed-closed", "store-failed-closed"]);
  }

  it("counts locally on ordinary paths and fails closed on /api/admin/ and /api/billing/ with the endpoint down", async () => {
    await expectModes(await closedPort());
  });

  for (const type of ["ProvisionedThroughputExceededException", "ThrottlingException"]) {
    it(`does the same when DynamoDB answers ${type}`, async () => {
      const throttling = await throttlingEndpoint(type);
      await expectModes(throttling.endpoint);
      // One call per request: /api/search's path and global rules share their subject's item
      // for the minute, so one UpdateItem counts both; never a retry inside the budget.
      expect(throttling.hits()).toBe(3);
    });
  }

  it("treats a store slower than the time budget as failed", async () => {
    const server = createServer(() => {
      // Never answers.
    });
    const endpoint = await listen(server);
    const started = performance.now();
    await expectModes(endpoint);
    // Three decisions at a 50 ms budget each, not the client's 3 s timeout.
    expect(performance.now() - started).toBeLessThan(1000);
  });
});
