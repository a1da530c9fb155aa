import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server } from "node:http";
import { createRequire } from "node:module";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CreateTableCommand, DynamoDBClient, PutItemCommand } from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CidrSet } from "../../src/core/ip.js";
import { createLimiter } from "../../src/limiter.js";
import { createLists, type ListSource, refreshingList } from "../../src/lists/index.js";
import { definePolicy } from "../../src/policy/load.js";
import type { PolicyInput } from "../../src/policy/schema.js";
import { MemoryStore } from "../../src/stores/memory.js";

const CREDENTIALS = { accessKeyId: "AKIDTEST", secretAccessKey: "test-secret" };

async function eventually(check: () => boolean, timeoutMs = 3000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

function listen(server: Server): Promise<number> {
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () => resolve((server.address() as AddressInfo).port)),
  );
}

function close(server: Server | undefined): Promise<void> {
  return new Promise((resolve) =>
    server === undefined ? resolve() : server.close(() => resolve()),
  );
}

function policyWith(lists: PolicyInput["lists"]) {
  return definePolicy({ tiers: { anonymous: { global: 100 } }, lists });
}

describe("lists in the policy", () => {
  it("needs exactly one source per list", () => {
    expect(() =>
      policyWith([{ name: "x", kind: "deny", file: "/a", url: "https://lists.example/x" }]),
    ).toThrow(/lists\.0.*exactly one source of file, url, s3 or dynamodb \(got file, url\)/);
    expect(() => policyWith([{ name: "x", kind: "deny" }])).toThrow(/got none/);
  });

  it("refreshes every 5 minutes unless told otherwise", () => {
    const policy = policyWith([
      { name: "a", kind: "allow", url: "https://lists.example/a" },
      { name: "b", kind: "deny", url: "https://lists.example/b", refresh: "30s" },
    ]);
    expect(policy.lists.map((list) => list.refreshMs)).toEqual([300_000, 30_000]);
  });
});

describe("refreshingList", () => {
  function scripted(results: (string[] | Error)[]): ListSource & { loads: number } {
    const source = {
      description: "scripted",
      loads: 0,
      async load() {
        const next = results[Math.min(source.loads, results.length - 1)] as string[] | Error;
        source.loads++;
        if (next instanceof Error) throw next;
        return new CidrSet(next);
      },
    };
    return source;
  }

  it("keeps the last good list when a load fails and counts the errors", async () => {
    const source = scripted([
      ["203.0.113.0/24"],
      new Error("source down"),
      new Error("still down"),
      ["198.51.100.1"],
    ]);
    let now = 1_000;
    const list = refreshingList({
      name: "bad-actors",
      kind: "deny",
      source,
      refreshMs: 60_000,
      clock: () => now,
    });
    await list.ready;
    expect(list.has("203.0.113.99")).toBe(true);
    now = 2_000;
    await list.refresh();
    await list.refresh();
    expect(list.has("203.0.113.99")).toBe(true);
    expect(list.stats()).toEqual({
      name: "bad-actors",
      kind: "deny",
      size: 1,
      lastRefreshAt: 1_000,
      errors: 2,
      lastError: "scripted: still down",
    });
    now = 3_000;
    await list.refresh();
    expect(list.has("203.0.113.99")).toBe(false);
    expect(list.has("198.51.100.1")).toBe(true);
    expect(list.stats().lastRefreshAt).toBe(3_000);
    list.close();
  });

  it("reloads on its interval", async () => {
    const source = scripted([["203.0.113.1"], ["203.0.113.2"]]);
    const list = refreshingList({
      name: "l",
      kind: "allow",
      source,
      refreshMs: 50,
      clock: Date.now,
    });
    await eventually(() => list.has("203.0.113.2"));
    list.close();
    const loads = source.loads;
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(source.loads).toBe(loads);
  });

  it("on-access mode reloads only when a lookup finds it stale (frozen runtimes)", async () => {
    const source = scripted([["203.0.113.1"], ["203.0.113.2"]]);
    let now = 0;
    const list = refreshingList({
      name: "l",
      kind: "allow",
      source,
      refreshMs: 300_000,
      clock: () => now,
      mode: "on-access",
    });
    await list.ready;
    now = 299_999;
    expect(list.has("203.0.113.1")).toBe(true);
    expect(source.loads).toBe(1);
    now = 300_000;
    list.has("203.0.113.1");
    await eventually(() => list.has("203.0.113.2"));
    expect(source.loads).toBe(2);
    list.close();
  });
});

describe("file source", () => {
  const dir = mkdtempSync(join(tmpdir(), "edgelimit-lists-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("picks up a changed file, and keeps the last good list when the file turns bad", async () => {
    const file = join(dir, "deny.txt");
    writeFileSync(file, "# scrapers\n203.0.113.7\n");
    const lists = await createLists(policyWith([{ name: "scrapers", kind: "deny", file }]));
    try {
      const [deny] = lists.deny as [ReturnType<typeof refreshingList>];
      expect(deny.has("203.0.113.7")).toBe(true);
      expect(deny.has("203.0.113.8")).toBe(false);

      // Written the way deploy tools write: a temporary file renamed over the old one.
      writeFileSync(`${file}.tmp`, JSON.stringify(["203.0.113.0/24", "2001:db8::/32"]));
      renameSync(`${file}.tmp`, file);
      await eventually(() => deny.has("203.0.113.8"));
      expect(deny.has("2001:db8::1")).toBe(true);
      expect(lists.stats()[0]).toMatchObject({
        name: "scrapers",
        kind: "deny",
        size: 2,
        errors: 0,
      });

      writeFileSync(file, '["203.0.113.0/24", "not-an-address"]');
      await eventually(() => lists.stats()[0]?.errors === 1);
      expect(deny.has("203.0.113.8")).toBe(true);
      expect(lists.stats()[0]?.lastError).toContain('"not-an-address"');
    } finally {
      lists.close();
    }
  });

  it("feeds the limiter: a listed address is refused 403, an allowlisted one skips counting", async () => {
    const denyFile = join(dir, "deny.json");
    const allowFile = join(dir, "allow.json");
    writeFileSync(denyFile, '{"cidrs": ["198.51.100.0/24"]}');
    writeFileSync(allowFile, '["192.0.2.10"]');
    const policy = policyWith([
      { name: "deny", kind: "deny", file: denyFile },
      { name: "partners", kind: "allow", file: allowFile },
    ]);
    const lists = await createLists(policy);
    try {
      const limiter = createLimiter({
        policy,
        store: new MemoryStore(),
        allowlists: lists.allow,
        denylists: lists.deny,
      });
      const denied = await limiter.check({ ip: "198.51.100.4", path: "/" });
      expect([denied.status, denied.reason]).toEqual([403, "denylisted"]);
      const allowed = await limiter.check({ ip: "192.0.2.10", path: "/" });
      expect(allowed.reason).toBe("allowlisted");
      expect((await limiter.check({ ip: "192.0.2.11", path: "/" })).reason).toBe("within-limit");
    } finally {
      lists.close();
    }
  });
});

describe("HTTP JSON source", () => {
  let server: Server;
  let port = 0;
  let answer: { status: number; body: string } = { status: 200, body: '["203.0.113.0/24"]' };

  beforeAll(async () => {
    server = createServer((_req, res) => {
      res.writeHead(answer.status, { "content-type": "application/json" });
      res.end(answer.body);
    });
    port = await listen(server);
  });
  afterAll(() => close(server));

  it("loads, refreshes, and keeps the last good list through errors", async () => {
    const lists = await createLists(
      policyWith([{ name: "feed", kind: "deny", url: `http://127.0.0.1:${port}/deny.json` }]),
    );
    try {
      const [deny] = lists.deny as [ReturnType<typeof refreshingList>];
      expect(deny.has("203.0.113.5")).toBe(true);
      answer = { status: 500, body: "upstream broke" };
      await deny.refresh();
      answer = { status: 200, body: '["203.0.113.0/24"' };
      await deny.refresh();
      expect(deny.has("203.0.113.5")).toBe(true);
      expect(lists.stats()[0]).toMatchObject({ size: 1, errors: 2 });
      answer = { status: 200, body: '["198.51.100.7"]' };
      await deny.refresh();
      expect(deny.has("203.0.113.5")).toBe(false);
      expect(deny.has("198.51.100.7")).toBe(true);
    } finally {
      lists.close();
    }
  });
});

describe("S3 JSON source", () => {
  let server: Server;
  let port = 0;
  const seen: IncomingMessage[] = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      seen.push(req);
      const authorization = req.headers.authorization ?? "";
      const signed =
        /^AWS4-HMAC-SHA256 Credential=AKIDTEST\/\d{8}\/eu-west-1\/s3\/aws4_request, SignedHeaders=[a-z0-9;-]+, Signature=[0-9a-f]{64}$/.test(
          authorization,
        ) && typeof req.headers["x-amz-date"] === "string";
      if (!signed) {
        res.writeHead(403, { "content-type": "application/xml" });
        res.end("<Error><Code>AccessDenied</Code></Error>");
        return;
      }
      if (req.url !== "/edge-lists/deny/current.json") {
        res.writeHead(404);
        res.end("<Error><Code>NoSuchKey</Code></Error>");
        return;
      }
      res.writeHead(200, { "content-type": "application/json" });
      res.end('{"cidrs": ["203.0.113.0/25"]}');
    });
    port = await listen(server);
  });
  afterAll(() => close(server));

  it("reads the object with a SigV4-signed GET", async () => {
    const lists = await createLists(
      policyWith([
        {
          name: "s3-deny",
          kind: "deny",
          s3: {
            bucket: "edge-lists",
            key: "deny/current.json",
            region: "eu-west-1",
            endpoint: `http://127.0.0.1:${port}`,
          },
        },
      ]),
      {
        env: {
          AWS_ACCESS_KEY_ID: CREDENTIALS.accessKeyId,
          AWS_SECRET_ACCESS_KEY: CREDENTIALS.secretAccessKey,
        },
      },
    );
    try {
      expect(lists.stats()[0]).toMatchObject({ size: 1, errors: 0 });
      expect(lists.deny[0]?.has(undefined)).toBe(false);
      expect((lists.deny[0] as ReturnType<typeof refreshingList>).has("203.0.113.100")).toBe(true);
      expect((lists.deny[0] as ReturnType<typeof refreshingList>).has("203.0.113.200")).toBe(false);
      expect(seen.at(-1)?.method).toBe("GET");
    } finally {
      lists.close();
    }
  });

  it("reports a refused unsigned request as an error", async () => {
    const response = await fetch(`http://127.0.0.1:${port}/edge-lists/deny/current.json`);
    expect(response.status).toBe(403);
  });

  it("names the missing credentials", async () => {
    await expect(
      createLists(
        policyWith([
          { name: "s", kind: "deny", s3: { bucket: "b", key: "k", region: "eu-west-1" } },
        ]),
        { env: {} },
      ),
    ).rejects.toThrow(/AWS_ACCESS_KEY_ID/);
  });
});

describe("DynamoDB item source (dynalite)", () => {
  let server: Server | undefined;
  let endpoint = "";
  let client: DynamoDBClient;

  beforeAll(async () => {
    const dynalite = createRequire(import.meta.url)("dynalite") as (options: object) => Server;
    server = dynalite({ createTableMs: 0 });
    endpoint = `http://127.0.0.1:${await listen(server)}`;
    client = new DynamoDBClient({ endpoint, region: "us-east-1", credentials: CREDENTIALS });
    await client.send(
      new CreateTableCommand({
        TableName: "edgelimit-lists",
        AttributeDefinitions: [{ AttributeName: "PK", AttributeType: "S" }],
        KeySchema: [{ AttributeName: "PK", KeyType: "HASH" }],
        BillingMode: "PAY_PER_REQUEST",
      }),
    );
    await client.send(
      new PutItemCommand({
        TableName: "edgelimit-lists",
        Item: { PK: { S: "allow" }, cidrs: { SS: ["192.0.2.0/24", "2001:db8:1::/48"] } },
      }),
    );
  });
  afterAll(async () => {
    client?.destroy();
    await close(server);
  });

  it("reads the item, follows updates, and keeps the last good list when the item goes", async () => {
    const lists = await createLists(
      policyWith([
        {
          name: "partners",
          kind: "allow",
          dynamodb: {
            table: "edgelimit-lists",
            region: "us-east-1",
            key: { PK: "allow" },
            endpoint,
          },
        },
      ]),
      { credentials: CREDENTIALS },
    );
    try {
      const [allow] = lists.allow as [ReturnType<typeof refreshingList>];
      expect(lists.stats()[0]).toMatchObject({
        name: "partners",
        kind: "allow",
        size: 2,
        errors: 0,
      });
      expect(allow.has("192.0.2.44")).toBe(true);
      expect(allow.has("2001:db8:1:2::9")).toBe(true);

      await client.send(
        new PutItemCommand({
          TableName: "edgelimit-lists",
          Item: { PK: { S: "allow" }, cidrs: { L: [{ S: "198.51.100.1" }] } },
        }),
      );
      await allow.refresh();
      expect(allow.has("192.0.2.44")).toBe(false);
      expect(allow.has("198.51.100.1")).toBe(true);

      await client.send(
        new PutItemCommand({
          TableName: "edgelimit-lists",
          Item: { PK: { S: "allow" }, other: { S: "x" } },
        }),
      );
      await allow.refresh();
      expect(allow.has("198.51.100.1")).toBe(true);
      expect(lists.stats()[0]).toMatchObject({ size: 1, errors: 1 });
      expect(lists.stats()[0]?.lastError).toContain("attribute cidrs");
    } finally {
      lists.close();
    }
  });
});
