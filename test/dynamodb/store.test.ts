import { AwsV4Signer } from "aws4fetch";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { signDynamoDbRequest } from "../../src/aws/sigv4.js";
import { DynamoDbHttpClient } from "../../src/stores/dynamodb/client.js";
import { DynamoDbStore, parseDynamodbUrl } from "../../src/stores/dynamodb.js";
import {
  counter,
  createRateLimitTable,
  type LocalDynamo,
  scanTable,
  startCountingProxy,
  startDynalite,
  TEST_CREDENTIALS,
} from "./harness.js";

// Well inside a window, so that no test straddles a boundary by accident.
const T0 = Date.UTC(2026, 1, 14, 14, 30, 5);

let dynamo: LocalDynamo;
const stores: DynamoDbStore[] = [];
let tableNumber = 0;

async function freshTable(): Promise<string> {
  const table = `rate-limits-${++tableNumber}`;
  await createRateLimitTable(dynamo.client, table);
  return table;
}

function storeOn(table: string): DynamoDbStore {
  const store = new DynamoDbStore({
    table,
    region: "us-east-1",
    endpoint: dynamo.endpoint,
    credentials: TEST_CREDENTIALS,
  });
  stores.push(store);
  return store;
}

beforeAll(async () => {
  dynamo = await startDynalite();
});

afterAll(async () => {
  for (const store of stores) await store.close();
  await dynamo?.close();
});

describe("DynamoDbStore over HTTP against dynalite", () => {
  it("admits exactly the limit when 500 requests race from five instances", async () => {
    const table = await freshTable();
    const instances = Array.from({ length: 5 }, () => storeOn(table));
    const spec = counter("ip:203.0.113.7|default|global");
    const results = await Promise.all(
      Array.from({ length: 500 }, (_, i) => (instances[i % 5] as DynamoDbStore).apply([spec], T0)),
    );
    expect(results.filter(([state]) => state?.allowed).length).toBe(100);
    const items = await scanTable(dynamo.client, table);
    expect(items).toHaveLength(1);
    expect(items[0]).toMatchObject({
      PK: spec.subject,
      SK: `60000ms:${Math.floor(T0 / 60_000)}`,
      counts: { "default|global": 500 },
    });
    // The TTL is set once, past the window's end plus the grace period.
    expect(items[0]?.ttl).toBe(Math.ceil(((Math.floor(T0 / 60_000) + 1) * 60_000) / 1000) + 300);
  });

  it("gives back the quota a refused request took on the counters that admitted it", async () => {
    const store = storeOn(await freshTable());
    const path = counter("ip:198.51.100.1|default|/api/export", { limit: 3 });
    const global = counter("ip:198.51.100.1|default|global", { limit: 60 });
    const allowed: boolean[] = [];
    for (let i = 0; i < 5; i++) {
      const states = await store.apply([path, global], T0 + i);
      allowed.push(states.every((state) => state.allowed));
    }
    await store.settled();
    expect(allowed).toEqual([true, true, true, false, false]);
    const items = await scanTable(store.client, store.table);
    // Both counters share their subject's item for this window.
    expect(items).toHaveLength(1);
    expect(items[0]?.PK).toBe(path.subject);
    // The refusing counter records every attempt (the challenge band needs it); the other only
    // the three requests that were let through.
    expect(items[0]?.counts).toEqual({ "default|/api/export": 5, "default|global": 3 });
    const [, globalState] = await store.apply([path, global], T0 + 10);
    expect(globalState?.remaining).toBe(57 - 1 + 1);
  });

  it("always counts observe counters, even when an enforcing counter refuses", async () => {
    const store = storeOn(await freshTable());
    const enforce = counter("user:u_1|default|global", { limit: 1 });
    const shadow = counter("user:u_1|default|shadow", { limit: 1, mode: "observe" });
    const first = await store.apply([enforce, shadow], T0);
    const second = await store.apply([enforce, shadow], T0 + 1);
    await store.settled();
    expect(first.map((state) => state.allowed)).toEqual([true, true]);
    expect(second.map((state) => state.allowed)).toEqual([false, false]);
    const items = await scanTable(store.client, store.table);
    expect(items).toHaveLength(1);
    expect(items[0]?.counts).toEqual({ "default|global": 2, "default|shadow": 2 });
  });

  it("counts a subject's fixed windows of one window with exactly one UpdateItem", async () => {
    const table = await freshTable();
    const proxy = await startCountingProxy(dynamo.endpoint);
    const store = new DynamoDbStore({
      table,
      region: "us-east-1",
      endpoint: proxy.endpoint,
      credentials: TEST_CREDENTIALS,
    });
    try {
      const path = counter("ip:198.51.100.2|default|/api/export", { limit: 10 });
      const global = counter("ip:198.51.100.2|default|global", { limit: 60 });
      const states = await store.apply([path, global], T0);
      expect(states.map((state) => [state.allowed, state.count])).toEqual([
        [true, 1],
        [true, 1],
      ]);
      expect([...proxy.operations]).toEqual([["UpdateItem", 1]]);
      // Another window length is another item: a second call, in parallel.
      const hourly = counter("ip:198.51.100.2|default|hourly", { window: { ms: 3_600_000 } });
      await store.apply([path, global, hourly], T0 + 1);
      expect([...proxy.operations]).toEqual([["UpdateItem", 3]]);
      const items = await scanTable(dynamo.client, table);
      expect(items.map((item) => [item.SK, item.counts]).sort()).toEqual([
        [`3600000ms:${Math.floor(T0 / 3_600_000)}`, { "default|hourly": 1 }],
        [`60000ms:${Math.floor(T0 / 60_000)}`, { "default|/api/export": 2, "default|global": 2 }],
      ]);
    } finally {
      await store.close();
      await proxy.close();
    }
  });

  it("weights the previous window's item for a sliding window", async () => {
    const store = storeOn(await freshTable());
    const spec = counter("ip:192.0.2.9|default|global", { algorithm: "sliding-window", limit: 10 });
    const windowStart = Math.floor(T0 / 60_000) * 60_000;
    for (let i = 0; i < 10; i++) await store.apply([spec], windowStart + 1_000 + i);
    // Half-way through the next window the previous ten weigh five: five more pass.
    const halfWay = windowStart + 60_000 + 30_000;
    const outcomes: boolean[] = [];
    for (let i = 0; i < 6; i++)
      outcomes.push((await store.apply([spec], halfWay + i))[0]?.allowed ?? false);
    expect(outcomes).toEqual([true, true, true, true, true, false]);
  });

  it("takes tokens with conditional writes: exact under a race, and refusals write nothing", async () => {
    const table = await freshTable();
    const instances = [storeOn(table), storeOn(table)];
    const spec = counter("ip:192.0.2.44|default|burst", {
      algorithm: "token-bucket",
      limit: 5,
      window: { ms: 10_000 },
    });
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) => (instances[i % 2] as DynamoDbStore).apply([spec], T0)),
    );
    expect(results.filter(([state]) => state?.allowed).length).toBe(5);
    const [item] = await scanTable(dynamo.client, table);
    expect(item?.tat).toBeCloseTo(T0 + 10_000, 3);
    // One token comes back every 2 s.
    expect((await instances[0]?.apply([spec], T0 + 1_000))?.[0]?.allowed).toBe(false);
    expect((await instances[0]?.apply([spec], T0 + 2_000))?.[0]?.allowed).toBe(true);
  });

  it("never trusts an expired item that TTL has not deleted yet", async () => {
    const store = storeOn(await freshTable());
    const windowed = counter("ip:192.0.2.50|default|global", { limit: 2 });
    const bucket = counter("ip:192.0.2.50|default|burst", {
      algorithm: "token-bucket",
      limit: 2,
      window: { ms: 10_000 },
    });
    const hourAgo = T0 - 3_600_000;
    for (let i = 0; i < 3; i++) await store.apply([windowed, bucket], hourAgo + i);
    const items = await scanTable(store.client, store.table);
    expect(items.length).toBe(2);
    expect(items.every((item) => (item.ttl ?? 0) * 1000 < T0)).toBe(true);
    const states = await store.apply([windowed, bucket], T0);
    expect(states.map((state) => state.allowed)).toEqual([true, true]);
    expect(states[0]?.remaining).toBe(1);
    expect(states[1]?.remaining).toBe(1);
  });

  it("signs requests exactly as an independent SigV4 implementation does", async () => {
    const body = JSON.stringify({ TableName: "rate-limits" });
    const now = new Date(Date.UTC(2026, 1, 14, 14, 30, 0));
    const credentials = { ...TEST_CREDENTIALS, sessionToken: "session-token" };
    const ours = signDynamoDbRequest({
      region: "eu-west-1",
      host: "dynamodb.eu-west-1.amazonaws.com",
      operation: "UpdateItem",
      body,
      credentials,
      now,
    });
    const reference = await new AwsV4Signer({
      method: "POST",
      url: "https://dynamodb.eu-west-1.amazonaws.com/",
      headers: {
        "content-type": "application/x-amz-json-1.0",
        "x-amz-target": "DynamoDB_20120810.UpdateItem",
      },
      body,
      ...credentials,
      service: "dynamodb",
      region: "eu-west-1",
      datetime: "20260214T143000Z",
      allHeaders: true,
    }).sign();
    expect(ours.authorization).toBe(reference.headers.get("authorization"));
  });

  it("speaks TLS to an https endpoint (node:https is loaded on the first call)", async () => {
    // dynalite answers plain HTTP: the same port reached as https must fail the TLS handshake,
    // which proves the request did not go out over plain http.
    const secure = new DynamoDbHttpClient({
      region: "us-east-1",
      endpoint: dynamo.endpoint.replace("http:", "https:"),
      credentials: TEST_CREDENTIALS,
    });
    try {
      const calls = [secure.call("ListTables", {}), secure.call("ListTables", {})];
      await Promise.all(
        calls.map((call) => expect(call).rejects.toMatchObject({ code: "EL_STORE_FAILED" })),
      );
      await expect(secure.call("ListTables", {})).rejects.toMatchObject({
        code: "EL_STORE_FAILED",
      });
      const plain = await dynamo.client.call<{ TableNames: string[] }>("ListTables", {});
      expect(Array.isArray(plain.TableNames)).toBe(true);
    } finally {
      secure.close();
    }
    const closedEarly = new DynamoDbHttpClient({
      region: "us-east-1",
      endpoint: dynamo.endpoint.replace("http:", "https:"),
      credentials: TEST_CREDENTIALS,
    });
    closedEarly.close();
  });

  it("reads its settings from a dynamodb:// URL", () => {
    expect(
      parseDynamodbUrl(
        "dynamodb://limits?region=eu-west-1&endpoint=http://127.0.0.1:8000&regions=eu-west-1,sa-east-1",
      ),
    ).toEqual({
      table: "limits",
      region: "eu-west-1",
      endpoint: "http://127.0.0.1:8000",
      globalRegions: ["eu-west-1", "sa-east-1"],
    });
    expect(
      parseDynamodbUrl(
        "dynamodb://limits?region=eu-west-1&regions=us-east-1,eu-west-1&leaseRegion=us-east-1&leaseTable=leases",
      ),
    ).toMatchObject({ leaseRegion: "us-east-1", leaseTable: "leases" });
    expect(
      parseDynamodbUrl(
        "dynamodb://limits?region=eu-west-1&leaseRegion=us-east-1&regionHolder=true&holderTable=holders",
      ),
    ).toMatchObject({ regionHolder: true, holderTable: "holders" });
    expect(parseDynamodbUrl("dynamodb://limits?region=eu-west-1")).not.toHaveProperty(
      "regionHolder",
    );
    expect(() => parseDynamodbUrl("dynamodb://limits?region=eu-west-1&regionHolder=yes")).toThrow(
      /regionHolder is true or false; got "yes"/,
    );
    expect(
      parseDynamodbUrl(
        "dynamodb://limits?region=eu-west-1&regions=us-east-1,eu-west-1&regionHolder=true&regionAllowance=true",
      ),
    ).toMatchObject({ regionHolder: true, regionAllowance: true });
    expect(() => parseDynamodbUrl("dynamodb://limits?region=eu-west-1&regionAllowance=1")).toThrow(
      /regionAllowance is true or false; got "1"/,
    );
    expect(() => parseDynamodbUrl("dynamodb://limits")).toThrow(/region/);
  });
});
