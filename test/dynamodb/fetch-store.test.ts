/**
 * `edgelimit/dynamodb-fetch` against dynalite on loopback, over the runtime's own `fetch`
 * (Node's here; workerd in fetch-workerd.test.ts): exact under concurrency, the same items as
 * the node:https store so both count in one table, the limiter's block cache, fail modes and
 * budget in front of it, and every failure bounded (a hung call aborted, the breaker per
 * endpoint, close).
 */
import { createServer, request as httpRequest, type IncomingHttpHeaders } from "node:http";
import { type AddressInfo, createServer as createTcpServer, type Socket } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { signAwsRequest } from "../../src/aws/sigv4.js";
import type { CounterState, Store } from "../../src/core/types.js";
import { createLimiter } from "../../src/limiter.js";
import { definePolicy } from "../../src/policy/load.js";
import {
  type DynamoDbStore,
  type DynamoDbStoreOptions,
  dynamodbStore,
} from "../../src/stores/dynamodb.js";
import {
  DynamoDbFetchClient,
  type DynamoDbFetchStore,
  type DynamoDbFetchStoreOptions,
  dynamodbFetchStore,
} from "../../src/stores/dynamodb-fetch.js";
import { lagMonitor } from "../support/loop-lag.js";
import { EXAMPLE_BUDGET_MS, exampleLimiter, timedCheck } from "../support/store-failure.js";
import { startSwitchboard } from "../support/switchboard.js";
import { withinOneWindow } from "../support/windows.js";
import {
  counter,
  createRateLimitTable,
  type LocalDynamo,
  scanTable,
  startCountingProxy,
  startDynalite,
  TEST_CREDENTIALS,
} from "./harness.js";

const T0 = Date.UTC(2026, 1, 14, 14, 30, 5);
/** Timer slack on a machine shared by other suites. */
const SLACK_MS = 150;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const lag = lagMonitor();
let dynamo: LocalDynamo;
let tableNumber = 0;
const cleanups: (() => Promise<unknown> | unknown)[] = [];
const stores: { close(): Promise<void> }[] = [];

async function freshTable(): Promise<string> {
  const table = `fetch-${++tableNumber}`;
  await createRateLimitTable(dynamo.client, table);
  return table;
}

/** A store of either client on `table`, closed after the file. */
function storeOn<S extends DynamoDbFetchStore | DynamoDbStore>(
  make: (options: DynamoDbFetchStoreOptions & DynamoDbStoreOptions) => S,
  table: string,
  endpoint = dynamo.endpoint,
  requestTimeoutMs?: number,
): S {
  const store = make({
    table,
    region: "us-east-1",
    endpoint,
    credentials: TEST_CREDENTIALS,
    requestTimeoutMs,
  });
  stores.push(store);
  return store;
}

const fetchStoreOn = (table: string, endpoint?: string, requestTimeoutMs?: number) =>
  storeOn(dynamodbFetchStore, table, endpoint, requestTimeoutMs);
const nodeStoreOn = (table: string, requestTimeoutMs?: number) =>
  storeOn(dynamodbStore, table, undefined, requestTimeoutMs);

/** A loopback server that records each request and answers with `answer`'s status and body. */
async function startRecorder(answer: () => { status: number; body: string }) {
  const requests: { headers: IncomingHttpHeaders; body: string }[] = [];
  const server = createServer((incoming, outgoing) => {
    let body = "";
    incoming.on("data", (chunk: Buffer) => {
      body += chunk.toString("utf8");
    });
    incoming.on("end", () => {
      requests.push({ headers: incoming.headers, body });
      const { status, body: text } = answer();
      outgoing.writeHead(status, { "content-type": "application/x-amz-json-1.0" });
      outgoing.end(text);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanups.push(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, requests };
}

/**
 * A loopback listener that reads requests and never answers. It counts the connections that
 * carried a request and are still open: the runtime's fetch may also open a spare connection
 * of its own after an abort (undici does, and closes it when idle), which carries nothing.
 */
async function startSilentServer() {
  const connections: { carried: boolean; closed: boolean }[] = [];
  const sockets = new Set<Socket>();
  const server = createTcpServer((socket) => {
    const connection = { carried: false, closed: false };
    connections.push(connection);
    sockets.add(socket);
    socket.on("data", () => {
      connection.carried = true;
    });
    socket.on("close", () => {
      connection.closed = true;
      sockets.delete(socket);
    });
    socket.on("error", () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanups.push(() => {
    for (const socket of sockets) socket.destroy();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get requests() {
      return connections.filter((connection) => connection.carried).length;
    },
    get waiting() {
      return connections.filter((connection) => connection.carried && !connection.closed).length;
    },
  };
}

/** Resolves once `done()` is true, or after `ms`. */
async function until(done: () => boolean, ms: number): Promise<void> {
  const started = performance.now();
  while (!done() && performance.now() - started < ms) await sleep(10);
}

/** A loopback proxy to dynalite that holds the first request's answer back for `delayMs`. */
async function startSlowFirstAnswer(target: string, delayMs: number): Promise<string> {
  const port = new URL(target).port;
  let first = true;
  const server = createServer((incoming, outgoing) => {
    const delay = first ? delayMs : 0;
    first = false;
    const forwarded = httpRequest(
      {
        host: "127.0.0.1",
        port,
        path: incoming.url,
        method: incoming.method,
        headers: incoming.headers,
      },
      (answer) => {
        setTimeout(() => {
          outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(outgoing);
        }, delay);
      },
    );
    forwarded.on("error", () => outgoing.destroy());
    incoming.pipe(forwarded);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanups.push(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

beforeAll(async () => {
  dynamo = await startDynalite();
});

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

afterAll(async () => {
  lag.stop();
  for (const store of stores) await store.close();
  await dynamo?.close();
});

describe("DynamoDbFetchStore against dynalite", () => {
  it("admits exactly the limit when 400 requests race from fetch and node:https instances on one table", async () => {
    const table = await freshTable();
    // Each of 400 calls at once may wait its turn at dynalite on a busy machine: this counts,
    // it does not time.
    const instances: Store[] = [
      fetchStoreOn(table, undefined, 30_000),
      nodeStoreOn(table, 30_000),
      fetchStoreOn(table, undefined, 30_000),
      nodeStoreOn(table, 30_000),
    ];
    const spec = counter("ip:203.0.113.9|default|global");
    const results = await Promise.all(
      Array.from({ length: 400 }, (_, i) => (instances[i % 4] as Store).apply([spec], T0)),
    );
    expect(results.filter(([state]) => state?.allowed).length).toBe(100);
    const items = await scanTable(dynamo.client, table);
    expect(items).toHaveLength(1);
    expect(items[0]?.counts).toEqual({ "default|global": 400 });
  });

  for (const [algorithm, specs] of [
    [
      "fixed windows (a path rule and a global rule in one item, with refunds)",
      [
        counter("ip:198.51.100.9|default|/api/export", { limit: 3 }),
        counter("ip:198.51.100.9|default|global", { limit: 5 }),
      ],
    ],
    [
      "a sliding window",
      [counter("ip:198.51.100.9|default|global", { algorithm: "sliding-window", limit: 3 })],
    ],
    [
      "a token bucket",
      [counter("ip:198.51.100.9|default|global", { algorithm: "token-bucket", limit: 3 })],
    ],
  ] as const) {
    it(`counts ${algorithm} turn by turn with the node:https store as one store alone does`, async () => {
      const [shared, alone] = [await freshTable(), await freshTable()];
      const turns = [fetchStoreOn(shared), nodeStoreOn(shared)];
      const single = nodeStoreOn(alone);
      const together: CounterState[][] = [];
      const apart: CounterState[][] = [];
      // Over two and a half windows: refusals, refunds, and the previous window's weight.
      for (let i = 0; i < 12; i++) {
        const store = turns[i % 2] as DynamoDbFetchStore | DynamoDbStore;
        together.push(await store.apply(specs, T0 + i * 12_500));
        await store.settled();
        apart.push(await single.apply(specs, T0 + i * 12_500));
        await single.settled();
      }
      expect(together.flat().some((state) => !state.allowed)).toBe(true);
      expect(together).toEqual(apart);
      const items = (table: string) =>
        scanTable(dynamo.client, table).then((found) =>
          found.map(({ PK, SK, count, tat, counts }) => ({ PK, SK, count, tat, counts })),
        );
      expect(await items(shared)).toEqual(await items(alone));
    });
  }

  it("signs what it sends: the session token of a credentials provider, the host fetch sends", async () => {
    const recorder = await startRecorder(() => ({ status: 200, body: "{}" }));
    let issued = 0;
    const client = new DynamoDbFetchClient({
      region: "eu-west-1",
      endpoint: recorder.endpoint,
      credentials: async () => ({
        accessKeyId: `ASIATEMP${++issued}`,
        secretAccessKey: "temporary-secret",
        sessionToken: "session-token-1",
      }),
    });
    await client.call("GetItem", { TableName: "t", Key: { PK: { S: "a" }, SK: { S: "b" } } });
    await client.call("Query", { TableName: "t" });
    expect(recorder.requests).toHaveLength(2);
    for (const [i, { headers, body }] of recorder.requests.entries()) {
      const amzDate = headers["x-amz-date"] as string;
      const now = new Date(
        `${amzDate.slice(0, 4)}-${amzDate.slice(4, 6)}-${amzDate.slice(6, 8)}T${amzDate.slice(9, 11)}:${amzDate.slice(11, 13)}:${amzDate.slice(13, 15)}Z`,
      );
      // The Node signer over what arrived: the same signature only if every signed field,
      // the host and the body arrived as signed.
      const expected = signAwsRequest({
        method: "POST",
        host: headers.host as string,
        path: "/",
        service: "dynamodb",
        region: "eu-west-1",
        headers: {
          "content-type": headers["content-type"] as string,
          "x-amz-target": headers["x-amz-target"] as string,
        },
        body,
        credentials: {
          accessKeyId: `ASIATEMP${i + 1}`,
          secretAccessKey: "temporary-secret",
          sessionToken: "session-token-1",
        },
        now,
      });
      expect(headers.authorization).toBe(expected.authorization);
      expect(headers.authorization).toContain(
        "SignedHeaders=content-type;host;x-amz-date;x-amz-security-token;x-amz-target",
      );
      expect(headers["x-amz-security-token"]).toBe("session-token-1");
      expect(headers.host).toBe(new URL(recorder.endpoint).host);
    }
    expect(recorder.requests.map(({ headers }) => headers["x-amz-target"])).toEqual([
      "DynamoDB_20120810.GetItem",
      "DynamoDB_20120810.Query",
    ]);
  });

  it("reads the standard variables without credentials, and names them when they are missing", async () => {
    const recorder = await startRecorder(() => ({ status: 200, body: "{}" }));
    const names = ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"] as const;
    const saved = names.map((name) => process.env[name]);
    cleanups.push(() =>
      names.forEach((name, i) => {
        if (saved[i] === undefined) delete process.env[name];
        else process.env[name] = saved[i];
      }),
    );
    for (const name of names) delete process.env[name];
    const client = new DynamoDbFetchClient({ region: "us-east-1", endpoint: recorder.endpoint });
    await expect(client.call("GetItem", {})).rejects.toMatchObject({
      code: "EL_STORE_OPTION",
      message: expect.stringContaining("AWS_ACCESS_KEY_ID"),
    });
    expect(recorder.requests).toHaveLength(0);
    process.env.AWS_ACCESS_KEY_ID = "AKIDFROMENV";
    process.env.AWS_SECRET_ACCESS_KEY = "secret-from-env";
    await client.call("GetItem", {});
    expect(recorder.requests[0]?.headers.authorization).toContain("Credential=AKIDFROMENV/");
  });

  it("aborts calls the endpoint never answers after requestTimeoutMs, closing their connections", async () => {
    const silent = await startSilentServer();
    const store = dynamodbFetchStore({
      region: "us-east-1",
      endpoint: silent.endpoint,
      credentials: TEST_CREDENTIALS,
      requestTimeoutMs: 300,
      breaker: false,
    });
    stores.push(store);
    const started = performance.now();
    const calls = ["192.0.2.1", "192.0.2.2", "192.0.2.3"].map((ip) =>
      store.apply([counter(`ip:${ip}|default|global`)], T0),
    );
    // Every call gets its handler now: they reject in separate timer callbacks.
    await Promise.all(
      calls.map((call) => expect(call).rejects.toMatchObject({ code: "EL_STORE_TIMEOUT" })),
    );
    const elapsed = performance.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(290);
    expect(elapsed).toBeLessThan(300 + SLACK_MS * 2);
    expect(silent.requests).toBe(3);
    // Each request's connection was closed by its abort: nothing waits at the endpoint.
    await until(() => silent.waiting === 0, 1000);
    expect(silent.waiting).toBe(0);
    expect(store.status()).toMatchObject({ state: "failing", failures: 3 });
  });

  it("aborts the calls in flight when closed", async () => {
    const silent = await startSilentServer();
    const client = new DynamoDbFetchClient({
      region: "us-east-1",
      endpoint: silent.endpoint,
      credentials: TEST_CREDENTIALS,
      requestTimeoutMs: 60_000,
    });
    const calls = [client.call("GetItem", {}), client.call("GetItem", {})];
    await until(() => silent.requests === 2, 2000);
    const started = performance.now();
    client.close();
    await Promise.all(
      calls.map((call) =>
        expect(call).rejects.toMatchObject({
          code: "EL_STORE_FAILED",
          message: expect.stringContaining("client closed"),
        }),
      ),
    );
    expect(performance.now() - started).toBeLessThan(SLACK_MS * 2);
    await until(() => silent.waiting === 0, 1000);
    expect(silent.waiting).toBe(0);
  });

  it("opens the endpoint's breaker after failures, sends nothing while open, and closes it on a probe's success", async () => {
    let failing = true;
    const recorder = await startRecorder(() =>
      failing
        ? { status: 500, body: '{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError"}' }
        : { status: 200, body: "{}" },
    );
    const client = new DynamoDbFetchClient({
      region: "us-east-1",
      endpoint: recorder.endpoint,
      credentials: TEST_CREDENTIALS,
      breaker: { failureThreshold: 3, cooldownMs: 200 },
    });
    for (let i = 0; i < 3; i++) {
      await expect(client.call("GetItem", {})).rejects.toMatchObject({
        type: "InternalServerError",
        status: 500,
      });
    }
    expect(client.status()).toMatchObject({ state: "open", failures: 3, breakerOpened: 1 });
    const opened = performance.now();
    await expect(client.call("GetItem", {})).rejects.toThrow(/circuit breaker is open/);
    expect(performance.now() - opened).toBeLessThan(SLACK_MS);
    expect(recorder.requests).toHaveLength(3);
    expect(client.status()).toMatchObject({ breakerRejected: 1 });
    failing = false;
    await sleep(250);
    await expect(client.call("GetItem", {})).resolves.toEqual({});
    expect(recorder.requests).toHaveLength(4);
    expect(client.status()).toMatchObject({ state: "ok" });
  });

  it("answers a blocked subject from the limiter's block cache, with no call to DynamoDB", async () => {
    const table = await freshTable();
    const proxy = await startCountingProxy(dynamo.endpoint);
    cleanups.push(() => proxy.close());
    const limiter = createLimiter({
      store: fetchStoreOn(table, proxy.endpoint),
      policy: definePolicy({ budget: "10s", tiers: { anonymous: { global: 3 } } }),
    });
    // `global: 3` counts in minute windows on the real clock: the ten must not straddle one.
    await withinOneWindow(60_000, 2_000);
    const reasons: string[] = [];
    for (let i = 0; i < 10; i++) {
      reasons.push((await limiter.check({ ip: "203.0.113.50", path: "/" })).reason);
    }
    expect(reasons).toEqual([
      ...Array(3).fill("within-limit"),
      "over-limit",
      ...Array(6).fill("blocked-cached"),
    ]);
    expect(proxy.operations.get("UpdateItem")).toBe(4);
  });

  it("counts a fresh instance's first decision when its first answer takes longer than the budget", async () => {
    const table = await freshTable();
    // 3x the example policy's budget: a cold instance's TLS handshake to a far region.
    const endpoint = await startSlowFirstAnswer(dynamo.endpoint, EXAMPLE_BUDGET_MS * 3);
    const limiter = exampleLimiter(fetchStoreOn(table, endpoint));
    const started = performance.now();
    const first = await timedCheck(lag, limiter, "10.42.0.1");
    expect(first.reason).toBe("within-limit");
    // Counted, though its answer came after the budget had run out three times over.
    expect(performance.now() - started).toBeGreaterThanOrEqual(EXAMPLE_BUDGET_MS * 3);
  });

  it("keeps every decision over an endpoint that never answers bounded, fails closed where the policy says, and counts again once it answers", async () => {
    const table = await freshTable();
    const board = await startSwitchboard();
    cleanups.push(() => board.close());
    const store = fetchStoreOn(table, `http://127.0.0.1:${board.port}`);
    const limiter = exampleLimiter(store);

    // The first call is a fresh instance's connection setup: the connect budget, then the budget.
    const first = await timedCheck(lag, limiter, "10.43.0.1");
    expect(first.reason).toBe("store-failed-local");
    expect(first.ms).toBeLessThan(1000 + EXAMPLE_BUDGET_MS + SLACK_MS);
    const decisions: { ms: number; reason: string }[] = [];
    const started = performance.now();
    // Calls are aborted after the request timeout (3 s), and the breaker opens.
    while (store.status().state !== "open" && performance.now() - started < 8000) {
      decisions.push(await timedCheck(lag, limiter, `10.43.1.${decisions.length & 255}`));
      await sleep(20);
    }
    expect(store.status().state).toBe("open");
    expect(decisions.every((decision) => decision.reason === "store-failed-local")).toBe(true);
    expect(Math.max(...decisions.map((decision) => decision.ms))).toBeLessThan(
      EXAMPLE_BUDGET_MS + SLACK_MS,
    );
    const admin = await timedCheck(lag, limiter, "10.43.2.1", "/api/admin/users");
    expect(admin).toMatchObject({ status: 503, reason: "store-failed-closed" });

    board.forwardTo(Number(new URL(dynamo.endpoint).port));
    const forwardedAt = performance.now();
    let resumed: number | undefined;
    for (let probe = 0; resumed === undefined && performance.now() - forwardedAt < 5000; probe++) {
      const decision = await timedCheck(lag, limiter, `10.43.3.${probe & 255}`);
      if (decision.reason === "within-limit") resumed = performance.now() - forwardedAt;
      else await sleep(20);
    }
    expect(resumed).toBeDefined();
    expect(resumed as number).toBeLessThan(1500);
  }, 30_000);
});
