import { createServer, request as httpRequest, type Server, type ServerResponse } from "node:http";
import { createRequire } from "node:module";
import type { AddressInfo } from "node:net";
import type { CounterSpec } from "../../src/core/types.js";
import { DynamoDbHttpClient } from "../../src/stores/dynamodb/client.js";

const require = createRequire(import.meta.url);

export const TEST_CREDENTIALS = { accessKeyId: "AKIDTEST", secretAccessKey: "test-secret" };

/** A counter as the limiter sends it: by default a fixed window of 100 a minute, enforced. */
export function counter(key: string, overrides: Partial<CounterSpec> = {}): CounterSpec {
  return {
    key,
    subject: key.split("|")[0] ?? key,
    algorithm: "fixed-window",
    limit: 100,
    window: { ms: 60_000 },
    cost: 1,
    mode: "enforce",
    ruleId: "test",
    namespace: "default",
    ...overrides,
  };
}

export interface LocalDynamo {
  readonly endpoint: string;
  readonly client: DynamoDbHttpClient;
  close(): Promise<void>;
}

/**
 * A dynalite server (in-memory DynamoDB protocol) on a free loopback port; `maxItemSizeKb`
 * lowers DynamoDB's 400 KB item bound (to reach it in a test).
 */
export async function startDynalite(
  region = "us-east-1",
  options: { readonly maxItemSizeKb?: number } = {},
): Promise<LocalDynamo> {
  const dynalite = require("dynalite") as (options: object) => Server;
  const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0, ...options });
  // dynalite throws (an uncaught exception in the test process) when a request it had already
  // taken reaches its database after close; close waits for every request taken to be answered.
  let answering = 0;
  server.on("request", (_request, response: ServerResponse) => {
    answering++;
    const end = response.end.bind(response) as (...args: unknown[]) => ServerResponse;
    response.end = ((...args: unknown[]) => {
      answering--;
      return end(...args);
    }) as ServerResponse["end"];
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const endpoint = `http://127.0.0.1:${port}`;
  const client = new DynamoDbHttpClient({ region, endpoint, credentials: TEST_CREDENTIALS });
  return {
    endpoint,
    client,
    async close() {
      client.close();
      for (let waited = 0; answering > 0 && waited < 10_000; waited += 5) {
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      server.closeAllConnections?.();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The table as infra/ declares it: PK/SK strings, on-demand. */
export async function createRateLimitTable(
  client: DynamoDbHttpClient,
  table: string,
): Promise<void> {
  await client.call("CreateTable", {
    TableName: table,
    AttributeDefinitions: [
      { AttributeName: "PK", AttributeType: "S" },
      { AttributeName: "SK", AttributeType: "S" },
    ],
    KeySchema: [
      { AttributeName: "PK", KeyType: "HASH" },
      { AttributeName: "SK", KeyType: "RANGE" },
    ],
    BillingMode: "PAY_PER_REQUEST",
  });
  // dynalite makes a table ACTIVE on a timer of its own, which a busy machine runs late; until
  // then it answers ResourceNotFoundException to item calls.
  for (let attempt = 0; attempt < 200; attempt++) {
    const { Table } = await client.call<{ Table: { TableStatus: string } }>("DescribeTable", {
      TableName: table,
    });
    if (Table.TableStatus === "ACTIVE") return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`table ${table} did not become ACTIVE`);
}

export interface StoredItem {
  readonly PK: string;
  readonly SK: string;
  /** A sliding window's own item. */
  readonly count?: number;
  readonly tat?: number;
  /** A shared fixed-window item: each counter's number, by attribute (`default|global`). */
  readonly counts: Record<string, number>;
  readonly ttl?: number;
}

export async function scanTable(client: DynamoDbHttpClient, table: string): Promise<StoredItem[]> {
  const answer = await client.call<{ Items: Record<string, { S?: string; N?: string }>[] }>(
    "Scan",
    {
      TableName: table,
      ConsistentRead: true,
    },
  );
  return answer.Items.map((item) => ({
    PK: item.PK?.S ?? "",
    SK: item.SK?.S ?? "",
    ...(item.count?.N !== undefined ? { count: Number(item.count.N) } : {}),
    ...(item.tat?.N !== undefined ? { tat: Number(item.tat.N) } : {}),
    ...(item.ttl?.N !== undefined ? { ttl: Number(item.ttl.N) } : {}),
    counts: Object.fromEntries(
      Object.entries(item)
        .filter(([name, value]) => name.includes("|") && value.N !== undefined)
        .map(([name, value]) => [name, Number(value.N)]),
    ),
  }));
}

export interface CountingProxy {
  readonly endpoint: string;
  /** Requests forwarded, by DynamoDB operation (`UpdateItem`, `Query`...). */
  readonly operations: Map<string, number>;
  close(): Promise<void>;
}

/** A loopback HTTP proxy in front of an endpoint that counts the calls that reach it. */
export async function startCountingProxy(target: string): Promise<CountingProxy> {
  const targetUrl = new URL(target);
  const operations = new Map<string, number>();
  const server = createServer((incoming, outgoing) => {
    const operation = String(incoming.headers["x-amz-target"] ?? "").split(".")[1] ?? "";
    operations.set(operation, (operations.get(operation) ?? 0) + 1);
    const forwarded = httpRequest(
      {
        hostname: targetUrl.hostname,
        port: targetUrl.port,
        path: incoming.url,
        method: incoming.method,
        headers: incoming.headers,
      },
      (answer) => {
        outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(outgoing);
      },
    );
    forwarded.on("error", () => outgoing.destroy());
    incoming.pipe(forwarded);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    operations,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
