/**
 * Overrides in DynamoDB (src/stores/dynamodb/overrides.ts), on dynalite through our client: the
 * source's contract (put, list, version, delete, changes; the bound and its pruning), two
 * limiters on one table sharing them within the documented bound (the default refresh, 5 s;
 * polled here up to 15 s for a busy machine), the `edgelimit override` CLI on a
 * `dynamodb://` URL, and the calls a request makes: the same with overrides present as without.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Override } from "../../src/core/overrides.js";
import { createLimiter, type Limiter } from "../../src/limiter.js";
import { loadPolicy } from "../../src/policy/load.js";
import {
  DynamoDbOverrides,
  OVERRIDE_SHARDS,
  OVERRIDES_PK,
  shardOf,
} from "../../src/stores/dynamodb/overrides.js";
import { DynamoDbStore } from "../../src/stores/dynamodb.js";
import { fieldOf } from "../../src/stores/memory-overrides.js";
import { cliEntry } from "../support/cli-entry.js";
import { withinOneWindow } from "../support/windows.js";
import { within } from "../support/within.js";
import {
  createRateLimitTable,
  type LocalDynamo,
  scanTable,
  startCountingProxy,
  startDynalite,
  TEST_CREDENTIALS,
} from "./harness.js";

const POLICY = `
version: 1
identity:
  user:
    trustedHeader: { user: x-user, from: any }
tiers:
  anonymous:
    global: { limit: 3, window: 600s }
  authenticated:
    global: { limit: 3, window: 600s }
overrides: { maxLimit: 1000 }
`;
const NOW = Date.now();

const dir = mkdtempSync(join(tmpdir(), "edgelimit-ddb-overrides-"));
const policyFile = join(dir, "policy.yaml");
writeFileSync(policyFile, POLICY);
let dynamo: LocalDynamo;
let tableNumber = 0;
const stores: DynamoDbStore[] = [];
const limiters: Limiter[] = [];

async function freshTable(): Promise<string> {
  const table = `overrides-${++tableNumber}`;
  await createRateLimitTable(dynamo.client, table);
  return table;
}

function storeOn(table: string, endpoint = dynamo.endpoint): DynamoDbStore {
  const store = new DynamoDbStore({
    table,
    region: "us-east-1",
    endpoint,
    credentials: TEST_CREDENTIALS,
  });
  stores.push(store);
  return store;
}

function limiterOn(store: DynamoDbStore, refreshMs?: number): Limiter {
  const limiter = createLimiter({
    policy: loadPolicy(policyFile),
    store,
    onStoreError: false,
    ...(refreshMs === undefined ? {} : { overrides: { refreshMs } }),
  });
  limiters.push(limiter);
  return limiter;
}

function limitOf(subject: string, limit: number, extra: Partial<Override> = {}): Override {
  return { subject, scope: "all", effect: "limit", limit, setAt: NOW, ...extra };
}

function request(user: string) {
  return { ip: "203.0.113.9", path: "/api/x", headers: { "x-user": user } };
}

/** The CLI in a child process (asynchronously: dynalite answers from this one). */
function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = {
    ...process.env,
    AWS_ACCESS_KEY_ID: TEST_CREDENTIALS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: TEST_CREDENTIALS.secretAccessKey,
  };
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [...cliEntry(), "override", ...args],
      { encoding: "utf8", env },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === "number" ? error.code : -1;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

beforeAll(async () => {
  dynamo = await startDynalite();
});

afterAll(async () => {
  for (const limiter of limiters) limiter.close();
  for (const store of stores) await store.close();
  await dynamo?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("the DynamoDB override source", () => {
  it("puts, lists, replaces by subject and scope, deletes, and moves its version each time", async () => {
    const table = await freshTable();
    const source = new DynamoDbOverrides(dynamo.client, table);
    expect(await source.version()).toBe("none");
    expect(await source.list()).toEqual([]);
    const first = limitOf("user:u_a", 50, { note: "contract 42" });
    await source.put(first, NOW, 10);
    const v1 = await source.version();
    expect(v1).not.toBe("none");
    await source.put(limitOf("user:u_a", 70), NOW + 1, 10);
    await source.put({ ...limitOf("ip:203.0.113.0/24", 0), scope: "rule:login" }, NOW + 2, 10);
    const v3 = await source.version();
    expect(v3).not.toBe(v1);
    const listed = await source.list();
    expect(listed.map((o) => [o.subject, o.scope, o.limit]).sort()).toEqual([
      ["ip:203.0.113.0/24", "rule:login", 0],
      ["user:u_a", "all", 70],
    ]);
    // Unchanged: the same version, read again.
    expect(await source.version()).toBe(v3);
    const change = { at: NOW + 3, action: "remove" as const, subject: "user:u_a", scope: "all" };
    expect(await source.delete("user:u_a", "all", { ...change, note: "ended" })).toBe(true);
    expect(await source.delete("user:u_a", "all", change)).toBe(false);
    expect((await source.list()).map((o) => o.subject)).toEqual(["ip:203.0.113.0/24"]);
    expect(await source.version()).not.toBe(v3);
    const log = await source.changes(10);
    expect(log.map((entry) => [entry.action, entry.subject, entry.note])).toEqual([
      ["set", "user:u_a", "contract 42"],
      ["set", "user:u_a", undefined],
      ["set", "ip:203.0.113.0/24", undefined],
      ["remove", "user:u_a", "ended"],
    ]);
    expect(await source.changes(2)).toEqual(log.slice(-2));
    expect(await source.changes(0)).toEqual([]);
    // Every item is under the overrides' own partition key; none carries a ttl.
    const items = await scanTable(dynamo.client, table);
    expect(items.every((item) => item.PK === OVERRIDES_PK && item.ttl === undefined)).toBe(true);
  });

  it("spreads overrides over its shard items", async () => {
    const table = await freshTable();
    const source = new DynamoDbOverrides(dynamo.client, table);
    for (let i = 0; i < 40; i++) await source.put(limitOf(`user:u_${i}`, i), NOW, 100);
    expect(await source.list()).toHaveLength(40);
    const shards = (await scanTable(dynamo.client, table)).filter((item) =>
      item.SK.startsWith("shard#"),
    );
    expect(shards.length).toBeGreaterThan(OVERRIDE_SHARDS / 2);
    expect(shards.length).toBeLessThanOrEqual(OVERRIDE_SHARDS);
  });

  it("refuses one more at the bound (EL_OVERRIDE_FULL), replaces one held, and prunes expired ones first", async () => {
    const source = new DynamoDbOverrides(dynamo.client, await freshTable());
    await source.put(limitOf("user:u_1", 1), NOW, 2);
    await source.put(limitOf("user:u_2", 2, { until: NOW + 1000 }), NOW, 2);
    await expect(source.put(limitOf("user:u_3", 3), NOW, 2)).rejects.toMatchObject({
      code: "EL_OVERRIDE_FULL",
    });
    // Replacing one held is no new override.
    await source.put(limitOf("user:u_1", 10), NOW, 2);
    expect((await source.list()).map((o) => o.subject).sort()).toEqual(["user:u_1", "user:u_2"]);
    // Once u_2 has expired, it is pruned to make room.
    await source.put(limitOf("user:u_3", 3), NOW + 1000, 2);
    expect((await source.list()).map((o) => o.subject).sort()).toEqual(["user:u_1", "user:u_3"]);
  });

  it("refuses an override whose shard item would pass the item size bound (EL_OVERRIDE_FULL), storing nothing", async () => {
    // DynamoDB's bound is 400 KB; this dynalite's, 2 KB: three notes of 500 fill a shard.
    const small = await startDynalite("us-east-1", { maxItemSizeKb: 2 });
    try {
      await createRateLimitTable(small.client, "small");
      const source = new DynamoDbOverrides(small.client, "small");
      const note = "n".repeat(500);
      const shard = shardOf(fieldOf("user:u_0", "all"));
      const same = Array.from({ length: 2000 }, (_, i) => `user:u_${i}`).filter(
        (subject) => shardOf(fieldOf(subject, "all")) === shard,
      );
      let stored = 0;
      let refused: unknown;
      for (const subject of same.slice(0, 5)) {
        try {
          await source.put(limitOf(subject, 1, { note }), NOW, 100);
          stored++;
        } catch (error) {
          refused = error;
          break;
        }
      }
      expect(stored).toBeGreaterThan(0);
      expect(refused).toMatchObject({ code: "EL_OVERRIDE_FULL" });
      expect(await source.list()).toHaveLength(stored);
      expect(await source.changes(10)).toHaveLength(stored);
    } finally {
      await small.close();
    }
  });

  it("reads as changed at each refresh for settleMs after a change (Global Tables replicate items in no set order)", async () => {
    const table = await freshTable();
    let now = NOW;
    const source = new DynamoDbOverrides(dynamo.client, table, {
      settleMs: 60_000,
      clock: () => now,
    });
    await source.put(limitOf("user:u_a", 5), NOW, 10);
    const first = await source.version();
    now += 5_000;
    expect(await source.version()).not.toBe(first);
    now += 60_000;
    const settled = await source.version();
    now += 5_000;
    expect(await source.version()).toBe(settled);
  });
});

describe("two limiters on one DynamoDB table", () => {
  it("a CLI limit override raises a user's limit on a limiter within the bound", async () => {
    const table = await freshTable();
    const limiter = limiterOn(storeOn(table));
    // The policy's 600 s window on the real clock: the refusal needs the three's window.
    await withinOneWindow(600_000, 2_000);
    for (let i = 0; i < 3; i++)
      expect((await limiter.check(request("u_raise"))).action).toBe("allow");
    expect((await limiter.check(request("u_raise"))).action).not.toBe("allow");
    const url = `dynamodb://${table}?region=us-east-1&endpoint=${dynamo.endpoint}`;
    const set = await cli(
      ["set", "user:u_raise", "--limit", "1000", "--note", "contract 42"].concat([
        "--store",
        url,
        "--policy",
        policyFile,
      ]),
    );
    expect(set.stderr).toBe("");
    expect(set.code).toBe(0);
    await within(async () => {
      const decision = await limiter.check(request("u_raise"));
      return decision.action === "allow" && decision.limit === 1000;
    }, "the raised limit");
    const listed = await cli(["list", "--store", url, "--log", "5"]);
    expect(listed.stdout).toContain("user:u_raise all limit 1000");
    expect(listed.stdout).toContain("set user:u_raise all (contract 42)");
  }, 20_000);

  it("block through one limiter refuses at once there and within the bound on the other; remove lifts it", async () => {
    const table = await freshTable();
    // A short refresh: how a change travels, not the default bound (the CLI test above waits
    // for that).
    const [a, b] = [limiterOn(storeOn(table), 500), limiterOn(storeOn(table), 500)];
    expect((await b.check(request("u_leak"))).action).toBe("allow");
    await a.overrides.set({ subject: "user:u_leak", block: "key leaked", note: "ops" });
    const refused = await a.check(request("u_leak"));
    expect([refused.status, refused.reason]).toEqual([403, "override-block"]);
    await within(
      async () => (await b.check(request("u_leak"))).reason === "override-block",
      "the block on b",
    );
    expect(await a.overrides.remove({ subject: "user:u_leak" })).toBe(true);
    expect((await a.check(request("u_leak"))).reason).not.toBe("override-block");
    await within(
      async () => (await b.check(request("u_leak"))).reason !== "override-block",
      "the removal on b",
    );
  }, 20_000);
});

describe("the cost of overrides on a request", () => {
  it("a request makes the same DynamoDB calls with overrides present as without", async () => {
    const table = await freshTable();
    const proxy = await startCountingProxy(dynamo.endpoint);
    try {
      // A long refresh: no background read falls inside the measured requests.
      const limiter = limiterOn(storeOn(table, proxy.endpoint), 600_000);
      await limiter.check(request("u_warm"));
      /** One request of each of 10 subjects: the calls they made, by operation. */
      const calls = async (prefix: string) => {
        proxy.operations.clear();
        for (let i = 0; i < 10; i++) await limiter.check(request(`${prefix}${i}`));
        return Object.fromEntries(proxy.operations);
      };
      const without = await calls("u_plain");
      for (let i = 0; i < 10; i++) {
        await limiter.overrides.set({ subject: `user:u_limited${i}`, limit: 10 + i });
      }
      const withOthers = await calls("u_other");
      const overridden = await calls("u_limited");
      expect(without).toEqual({ UpdateItem: 10 });
      expect(withOthers).toEqual(without);
      expect(overridden).toEqual(without);
    } finally {
      await proxy.close();
    }
  });
});
