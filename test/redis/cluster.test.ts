import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CounterSpec } from "../../src/core/types.js";
import { createLimiter } from "../../src/limiter.js";
import { definePolicy } from "../../src/policy/load.js";
import { type RedisStore, redisStoreFromUrl } from "../../src/stores/redis.js";
import { startCluster, type TestCluster } from "./redis-server.js";

let cluster: TestCluster;
let store: RedisStore;
/** Direct connections to each master, bypassing cluster routing, to see where keys live. */
let direct: Redis[];

beforeAll(async () => {
  cluster = await startCluster();
  store = redisStoreFromUrl(cluster.url);
  store.client.on("error", () => {});
  await store.ready();
  direct = cluster.nodes.map((node) => new Redis({ port: node.port, host: "127.0.0.1" }));
}, 60_000);

afterAll(async () => {
  for (const client of direct ?? []) client.disconnect();
  await store?.close();
  await cluster?.cleanup();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Today's window key of a fixed window of one day (the policies here count in those). */
function dayKey(key: string): string {
  return `${key}|w86400000:${Math.floor(Date.now() / 86_400_000)}`;
}

/** Index in `direct` of the master that holds `key`, or its window key of today, right now. */
async function ownerOf(key: string): Promise<number> {
  // A node that does not own the slot answers MOVED: not here.
  const owners = await Promise.all(
    direct.map((client) => client.exists(key, dayKey(key)).catch(() => 0)),
  );
  const found = owners.findIndex((count) => count > 0);
  if (found === -1 || owners.findLastIndex((count) => count > 0) !== found)
    throw new Error(`${key} not on exactly one node`);
  return found;
}

function policy(limit: number) {
  return definePolicy({
    budget: "10s",
    tiers: { anonymous: { global: { limit, window: "1d" } } },
  });
}

describe("Redis Cluster with three masters", () => {
  it("holds each limit exactly for keys spread over all three masters", async () => {
    const limiter = createLimiter({ store, policy: policy(10) });
    const ips = Array.from({ length: 24 }, (_, index) => `10.3.0.${index}`);
    const verdicts = await Promise.all(
      ips.flatMap((ip) => Array.from({ length: 30 }, () => limiter.check({ ip, path: "/x" }))),
    );
    for (const ip of ips) {
      const mine = verdicts.filter((verdict) => verdict.subject === `ip:${ip}`);
      expect(mine.filter((verdict) => verdict.reason === "within-limit")).toHaveLength(10);
      expect(mine.filter((verdict) => verdict.action === "block")).toHaveLength(20);
    }
    const keys = ips.map((ip) => {
      const verdict = verdicts.find((candidate) => candidate.subject === `ip:${ip}`);
      return redisKeyOf(verdict?.outcomes[0]?.key as string, `ip:${ip}`);
    });
    const owners = new Set(await Promise.all(keys.map(ownerOf)));
    expect(owners).toEqual(new Set([0, 1, 2]));
  });

  it("sends counters of two subjects to their own slots as parallel calls", async () => {
    const spec = (subject: string, scope: string): CounterSpec => ({
      key: `${subject}|api|${scope}`,
      subject,
      algorithm: "fixed-window",
      limit: 2,
      window: { ms: 86_400_000 },
      cost: 1,
      mode: "enforce",
      ruleId: scope,
      namespace: "api",
    });
    const request = [
      spec("ip:10.5.0.1", "login"),
      spec("user:u_42", "api"),
      spec("ip:10.5.0.1", "burst"),
    ];
    const before = store.roundTrips;
    const first = await store.apply(request, Date.now());
    expect(store.roundTrips - before).toBe(2);
    expect(first.map((state) => state.count)).toEqual([1, 1, 1]);
    const second = await store.apply(request, Date.now());
    expect(second.map((state) => state.count)).toEqual([2, 2, 2]);
    const keys = request.map((counter) => store.redisKey(counter));
    const slots = await Promise.all(keys.map((key) => direct[0]?.cluster("KEYSLOT", key)));
    expect(slots[0]).toBe(slots[2]);
    expect(slots[0]).not.toBe(slots[1]);
  });

  it("keeps a key's count exact while its slot moves to another master (MOVED, ASK)", async () => {
    const limit = 150;
    const limiter = createLimiter({ store, policy: policy(limit), blockCache: false });
    const ip = "10.4.0.1";
    const first = await limiter.check({ ip, path: "/x" });
    expect(first.reason).toBe("within-limit");
    const key = redisKeyOf(first.outcomes[0]?.key as string, `ip:${ip}`);
    const source = await ownerOf(key);
    const target = (source + 1) % 3;
    const sourceNode = direct[source] as Redis;
    const targetNode = direct[target] as Redis;
    const slot = (await sourceNode.cluster("KEYSLOT", key)) as number;
    const sourceId = (await sourceNode.cluster("MYID")) as string;
    const targetId = (await targetNode.cluster("MYID")) as string;

    const reasons: string[] = [first.reason];
    // Requests go on until the slot has moved and 20 more have been sent after the switch.
    let switchedAt = Number.POSITIVE_INFINITY;
    const loop = async (): Promise<void> => {
      while (reasons.length < Math.max(2 * limit, switchedAt + 20)) {
        reasons.push((await limiter.check({ ip, path: "/x" })).reason);
        await sleep(1);
      }
    };
    const loops = Promise.all(Array.from({ length: 4 }, loop));

    await sleep(50);
    const sentBeforeMigration = reasons.length;
    await targetNode.cluster("SETSLOT", slot, "IMPORTING", sourceId);
    await sourceNode.cluster("SETSLOT", slot, "MIGRATING", targetId);
    await sleep(30);
    for (;;) {
      const keys = (await sourceNode.cluster("GETKEYSINSLOT", slot, 100)) as string[];
      if (keys.length === 0) break;
      await sourceNode.migrate(
        "127.0.0.1",
        cluster.nodes[target]?.port as number,
        "",
        0,
        5000,
        "KEYS",
        ...keys,
      );
    }
    await sleep(30);
    for (const node of direct) await node.cluster("SETSLOT", slot, "NODE", targetId);
    const sentBeforeSwitch = reasons.length;
    switchedAt = sentBeforeSwitch;
    await loops;
    // Requests flowed before, during and after the move.
    expect(sentBeforeMigration).toBeGreaterThan(1);
    expect(sentBeforeSwitch).toBeGreaterThan(sentBeforeMigration);
    expect(reasons.length).toBeGreaterThan(sentBeforeSwitch);

    expect(await ownerOf(key)).toBe(target);
    const admitted = reasons.filter((reason) => reason === "within-limit").length;
    const failed = reasons.filter((reason) => reason.startsWith("store-failed")).length;
    expect(failed).toBe(0);
    expect(admitted).toBe(limit);
    // The fixed window counts every attempt: the stored count is every request, once, in the
    // day's key (the counter's key, its span and the window's index; the same slot).
    expect(await targetNode.get(dayKey(key))).toBe(String(reasons.length));
  });
});

function redisKeyOf(counterKey: string, subject: string): string {
  return `el:{${subject}}${counterKey.slice(subject.length)}`;
}
