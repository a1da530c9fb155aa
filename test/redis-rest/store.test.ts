/**
 * `edgelimit/redis-rest`: Redis over HTTP (the Upstash REST protocol) against a real
 * redis-server, through the REST-to-Redis bridge in test/support. Everything Redis is asked is
 * checked in Redis itself (its keys, `INFO commandstats`); the bridge counts HTTP requests.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AlgorithmName } from "../../src/core/types.js";
import type { Verdict } from "../../src/http/respond.js";
import { createLimiter } from "../../src/limiter.js";
import { definePolicy } from "../../src/policy/load.js";
import { APPLY_COUNTERS_SHA, RedisStore } from "../../src/stores/redis.js";
import {
  type RedisRestStore,
  redisRestStore,
  redisRestStoreFromUrl,
} from "../../src/stores/redis-rest.js";
import { type RedisServer, startRedis } from "../redis/redis-server.js";
import { type RedisRestBridge, startRedisRestBridge } from "../support/redis-rest-bridge.js";
import { withinOneWindow } from "../support/windows.js";

const ALGORITHMS: AlgorithmName[] = ["fixed-window", "sliding-window", "token-bucket"];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let server: RedisServer;
let cleanup: () => Promise<void>;
let bridge: RedisRestBridge;
let admin: Redis;
let store: RedisRestStore;

beforeAll(async () => {
  ({ server, cleanup } = await startRedis());
  bridge = await startRedisRestBridge(server.url);
  admin = new Redis({ port: server.port, host: "127.0.0.1", lazyConnect: true });
  admin.on("error", () => {});
  store = redisRestStore({ url: bridge.url, token: bridge.token });
  await store.ready();
});

afterAll(async () => {
  admin?.disconnect();
  await bridge?.close();
  await cleanup?.();
});

function tally(verdicts: readonly Verdict[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const { reason } of verdicts) counts[reason] = (counts[reason] ?? 0) + 1;
  return counts;
}

async function scriptCalls(): Promise<{ evalsha: number; eval: number }> {
  const info = await admin.info("commandstats");
  const calls = (name: string) =>
    Number(new RegExp(`^cmdstat_${name}:calls=(\\d+)`, "m").exec(info)?.[1] ?? 0);
  return { evalsha: calls("evalsha"), eval: calls("eval") };
}

const requestsTo = (path: string) => bridge.requests[path] ?? 0;

/** The first "within-limit" reason within `ms`, or the last reason seen. */
async function reasonWithin(ms: number, check: () => Promise<Verdict>): Promise<string> {
  const deadline = Date.now() + ms;
  let reason = "";
  while (Date.now() < deadline) {
    reason = (await check()).reason;
    if (reason === "within-limit") break;
    await sleep(50);
  }
  return reason;
}

describe("Redis over HTTP (edgelimit/redis-rest) on a real redis-server", () => {
  for (const algorithm of ALGORITHMS) {
    it(`${algorithm}: 2 stores x 500 concurrent requests against a limit of 100 admit exactly 100`, async () => {
      const policy = definePolicy({
        budget: "10s",
        tiers: { anonymous: { global: { limit: 100, window: "1d", algorithm } } },
      });
      const second = redisRestStore({ url: bridge.url, token: bridge.token });
      const limiters = [store, second].map((each) => createLimiter({ store: each, policy }));
      const ip = `10.7.0.${ALGORITHMS.indexOf(algorithm)}`;
      const verdicts = await Promise.all(
        Array.from({ length: 1000 }, (_, i) =>
          (limiters[i % 2] as (typeof limiters)[number]).check({ ip, path: "/api/items" }),
        ),
      );
      expect(tally(verdicts)).toEqual({ "within-limit": 100, "over-limit": 900 });
    });
  }

  it("counts in the same keys, with the same script, as edgelimit/redis", async () => {
    const policy = definePolicy({
      budget: "10s",
      tiers: { anonymous: { global: { limit: 5, window: "1d" } } },
    });
    const overSockets = new RedisStore({ client: server.url });
    try {
      const viaHttp = createLimiter({ store, policy });
      const viaSockets = createLimiter({ store: overSockets, policy });
      const request = { ip: "10.7.1.1", path: "/api/items" };
      const reasons: string[] = [];
      for (const limiter of [viaHttp, viaSockets, viaHttp, viaSockets, viaHttp, viaSockets]) {
        reasons.push((await limiter.check(request)).reason);
      }
      expect(reasons).toEqual([...Array(5).fill("within-limit"), "over-limit"]);
      await admin.connect().catch(() => {});
      expect(await admin.script("EXISTS", APPLY_COUNTERS_SHA)).toEqual([1]);
      const keys = await admin.keys("el:{ip:10.7.1.1}*");
      expect(keys).toHaveLength(1);
    } finally {
      await overSockets.close();
    }
  });

  it("sends the decisions of one turn as one HTTP request and one script call", async () => {
    await admin.config("RESETSTAT");
    // Overrides are read in the background (an HMGET at start, then every 5 s): not counted here.
    const limiter = createLimiter({
      store,
      overrides: false,
      policy: definePolicy({
        budget: "10s",
        tiers: { anonymous: { global: { limit: 10, window: "1d" }, paths: { "/api/x": 5 } } },
      }),
    });
    const before = requestsTo("/");
    const verdicts = await Promise.all(
      Array.from({ length: 20 }, (_, i) => limiter.check({ ip: `10.7.2.${i}`, path: "/api/x" })),
    );
    expect(tally(verdicts)).toEqual({ "within-limit": 20 });
    // And a new limiter's one read of the reset log (an HMGET), with its first call.
    expect(requestsTo("/") - before).toBe(1 + 1);
    expect(await scriptCalls()).toEqual({ evalsha: 1, eval: 0 });
  });

  it("answers a blocked subject from the block cache, without a request", async () => {
    const limiter = createLimiter({
      store,
      policy: definePolicy({
        budget: "10s",
        tiers: { anonymous: { global: { limit: 2, window: "1d" } } },
      }),
    });
    const request = { ip: "10.7.3.1", path: "/api/items" };
    const first = [];
    for (let i = 0; i < 3; i++) first.push((await limiter.check(request)).reason);
    expect(first).toEqual(["within-limit", "within-limit", "over-limit"]);
    const before = requestsTo("/");
    const later = [];
    for (let i = 0; i < 20; i++) later.push(await limiter.check(request));
    expect(tally(later)).toEqual({ "blocked-cached": 20 });
    expect(requestsTo("/") - before).toBe(0);
  });

  it("falls back to EVAL once when Redis lost the script, then uses EVALSHA again", async () => {
    await admin.script("FLUSH");
    await admin.config("RESETSTAT");
    const limiter = createLimiter({
      store,
      policy: definePolicy({ budget: "10s", tiers: { anonymous: { global: 10 } } }),
    });
    expect((await limiter.check({ ip: "10.7.4.1", path: "/" })).reason).toBe("within-limit");
    expect((await limiter.check({ ip: "10.7.4.1", path: "/" })).reason).toBe("within-limit");
    // The first EVALSHA fails (NOSCRIPT), EVAL runs and caches it, the second call finds it.
    expect(await scriptCalls()).toEqual({ evalsha: 2, eval: 1 });
  });

  it("resets a subject's counters in one request", async () => {
    // `global: 1` is a minute window on the real clock: the refusal below needs the same minute.
    await withinOneWindow(60_000, 2_000);
    const limiter = createLimiter({
      store,
      policy: definePolicy({ budget: "10s", tiers: { anonymous: { global: 1 } } }),
    });
    const request = { ip: "10.7.5.1", path: "/" };
    expect((await limiter.check(request)).reason).toBe("within-limit");
    expect((await limiter.check(request)).reason).toBe("over-limit");
    const before = requestsTo("/pipeline");
    expect(await limiter.reset(request)).toEqual(["anonymous.global"]);
    expect(requestsTo("/pipeline") - before).toBe(1);
    expect(await admin.keys("el:{ip:10.7.5.1}*")).toEqual([]);
    expect((await limiter.check(request)).reason).toBe("within-limit");
  });

  it("says so when the endpoint refuses the token, and the rules' fail modes apply", async () => {
    const forged = redisRestStore({ url: bridge.url, token: "not-the-token" });
    await expect(forged.ready()).rejects.toThrow(/refused the token \(HTTP 401\)/);
    const causes: string[] = [];
    const limiter = createLimiter({
      store: forged,
      onStoreError: (error) => causes.push((error as Error).message),
      policy: definePolicy({
        budget: "1s",
        failClosed: ["/api/admin/"],
        tiers: { anonymous: { global: 10 } },
      }),
    });
    expect(await limiter.check({ ip: "10.7.6.1", path: "/api/items" })).toMatchObject({
      action: "allow",
      reason: "store-failed-local",
    });
    expect(await limiter.check({ ip: "10.7.6.1", path: "/api/admin/users" })).toMatchObject({
      status: 503,
      reason: "store-failed-closed",
    });
    expect(causes[0]).toMatch(/refused the token/);
    expect(causes.join("\n")).not.toContain("not-the-token");
  });

  it("opens from redis+http:// with the token in the URL or in EDGELIMIT_REDIS_REST_TOKEN", async () => {
    const endpoint = bridge.url.replace(/^http:\/\//, "");
    const inUrl = redisRestStoreFromUrl(`redis+http://:${bridge.token}@${endpoint}`);
    await inUrl.ready();
    expect(inUrl.client.url).toBe(bridge.url);
    const fromEnv = redisRestStoreFromUrl(`redis+http://${endpoint}`, {
      EDGELIMIT_REDIS_REST_TOKEN: bridge.token,
    });
    await fromEnv.ready();
    expect(() => redisRestStoreFromUrl(`redis+http://${endpoint}`, {})).toThrow(
      /has no token: write redis\+https:\/\/:TOKEN@127\.0\.0\.1:\d+, or set EDGELIMIT_REDIS_REST_TOKEN/,
    );
    expect(() => redisRestStore({ url: "redis://127.0.0.1:6379", token: "t" })).toThrow(
      /must start with https:\/\/.*For redis:\/\/ use edgelimit\/redis/,
    );
  });
});

describe("Redis over HTTP when Redis fails", () => {
  it("answers within the budget while Redis is stalled, counts locally or fails closed, and counts again after", async () => {
    const BUDGET_MS = 50;
    // Far under the store's own 1 s timeout, so the budget answered; loose enough for a machine
    // whose other work (a next build beside this file) delays our timers, which the budget
    // gives back to the store rather than blame it (core/deadline.ts).
    const SLACK_MS = 250;
    const limiter = createLimiter({
      store,
      policy: definePolicy({
        budget: `${BUDGET_MS}ms`,
        failClosed: ["/api/admin/"],
        tiers: { anonymous: { global: { limit: 1_000_000, window: "1d" } } },
      }),
    });
    // Warm: the first call of the store was its connection setup.
    expect((await limiter.check({ ip: "10.7.7.1", path: "/api/items" })).reason).toBe(
      "within-limit",
    );
    const pid = server.pid as number;
    process.kill(pid, "SIGSTOP");
    const stalled: { tookMs: number; verdict: Verdict; path: string }[] = [];
    try {
      for (let i = 0; i < 20; i++) {
        const path = i % 2 === 0 ? "/api/items" : "/api/admin/users";
        const startedAt = performance.now();
        const verdict = await limiter.check({ ip: `10.7.7.${i}`, path });
        stalled.push({ tookMs: performance.now() - startedAt, verdict, path });
      }
    } finally {
      process.kill(pid, "SIGCONT");
    }
    for (const sample of stalled) {
      expect(sample.tookMs).toBeLessThan(BUDGET_MS + SLACK_MS);
      expect(sample.verdict.reason).toBe(
        sample.path.startsWith("/api/admin/") ? "store-failed-closed" : "store-failed-local",
      );
    }
    // Requests that timed out were aborted; Redis answers again once continued.
    expect(await reasonWithin(10_000, () => limiter.check({ ip: "10.7.7.99", path: "/" }))).toBe(
      "within-limit",
    );
  });

  it("fails at once while redis-server is down, and resumes when it is back", async () => {
    const limiter = createLimiter({
      store,
      policy: definePolicy({
        budget: "2s",
        failClosed: ["/api/admin/"],
        tiers: { anonymous: { global: { limit: 1_000_000, window: "1d" } } },
      }),
    });
    await server.kill();
    try {
      const startedAt = performance.now();
      const open = await limiter.check({ ip: "10.7.8.1", path: "/api/items" });
      const closed = await limiter.check({ ip: "10.7.8.1", path: "/api/admin/users" });
      expect(open.reason).toBe("store-failed-local");
      expect(closed).toMatchObject({ status: 503, reason: "store-failed-closed" });
      // An error from the bridge, not the budget: both well under one 2 s budget.
      expect(performance.now() - startedAt).toBeLessThan(1000);
    } finally {
      await server.start();
    }
    expect(await reasonWithin(10_000, () => limiter.check({ ip: "10.7.8.2", path: "/" }))).toBe(
      "within-limit",
    );
  });
});
