/**
 * `hits_addend: 0` in the rate limit service and `limiter.peek` agree: both read the counters
 * at cost 0, count nothing and make no counter. Against a `--policy` the service answers such a
 * call with the limiter's peek itself; against an envoyproxy/ratelimit configuration the
 * descriptor's counters go to the store at cost 0, which writes nothing. On the memory store
 * and on a real redis-server.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Store } from "../../src/core/types.js";
import { definePolicy } from "../../src/policy/load.js";
import { loadRlsConfig } from "../../src/rls/config-files.js";
import { CODE, type RateLimitRequest } from "../../src/rls/messages.js";
import { describeRequest } from "../../src/rls/policy-decide.js";
import { RateLimitService } from "../../src/rls/service.js";
import { MemoryStore } from "../../src/stores/memory.js";
import { RedisStore } from "../../src/stores/redis.js";
import { type RedisServer, startRedis } from "../redis/redis-server.js";

const dir = mkdtempSync(join(tmpdir(), "edgelimit-rls-peek-"));
const file = join(dir, "config.yaml");
writeFileSync(
  file,
  [
    "domain: svc",
    "descriptors:",
    "  - key: client",
    "    rate_limit: { unit: hour, requests_per_unit: 10 }",
    "",
  ].join("\n"),
);

let server: RedisServer;
let cleanup: () => Promise<void>;
let admin: Redis;

beforeAll(async () => {
  ({ server, cleanup } = await startRedis());
  admin = new Redis({ port: server.port, host: "127.0.0.1" });
});

afterAll(async () => {
  admin?.disconnect();
  await cleanup?.();
  rmSync(dir, { recursive: true, force: true });
});

const NOW = Date.now();

function service(store: Store): RateLimitService {
  return new RateLimitService({
    store,
    config: loadRlsConfig(file, { mergeDomains: false, globalShadow: false }).config,
    policy: definePolicy({
      tiers: {
        anonymous: {
          global: { limit: 10, window: "3600s", algorithm: "sliding-window" },
          paths: { "/api/": { limit: 6, window: "600s" } },
        },
      },
    }),
    clock: () => NOW,
  });
}

/** A call for the `--policy`: one descriptor per part of the request, each with `hits`. */
const policyCall = (hits: number | undefined): RateLimitRequest => ({
  domain: "edge",
  hitsAddend: 0,
  descriptors: [
    { entries: [{ key: "path", value: "/api/search" }], limit: undefined, hitsAddend: hits },
    { entries: [{ key: "method", value: "GET" }], limit: undefined, hitsAddend: hits },
  ],
});

/** A call for the configuration's domain: one descriptor. */
const configCall = (value: string, hits: number | undefined): RateLimitRequest => ({
  domain: "svc",
  hitsAddend: 0,
  descriptors: [{ entries: [{ key: "client", value }], limit: undefined, hitsAddend: hits }],
});

const PEER = "203.0.113.7";

const stores: Record<string, () => Promise<{ store: Store; keys: () => Promise<number> }>> = {
  memory: async () => {
    const store = new MemoryStore();
    return { store, keys: async () => store.size };
  },
  redis: async () => {
    const prefix = `rlspeek${Math.random().toString(36).slice(2)}:`;
    const store = new RedisStore({ client: server.url, clock: "caller", prefix });
    await store.ready();
    return { store, keys: async () => (await admin.keys(`${prefix}*`)).length };
  },
};

describe("rls hits_addend: 0 and limiter.peek", () => {
  for (const [name, make] of Object.entries(stores)) {
    it(`${name}: against a policy, report the same limit, remaining and reset, and count nothing`, async () => {
      const { store, keys } = await make();
      const rls = service(store);
      try {
        for (let i = 0; i < 3; i++) await rls.shouldRateLimit(policyCall(undefined), PEER);
        const held = await keys();
        let looked = await rls.shouldRateLimit(policyCall(0), PEER);
        for (let i = 0; i < 50; i++) looked = await rls.shouldRateLimit(policyCall(0), PEER);
        const peek = await rls.limiter?.peek(describeRequest(policyCall(0), PEER));
        // The path rule is the one with the least left: what a verdict reports.
        const path = peek?.rules.find((rule) => rule.rule === "anonymous.path./api/");
        expect(path).toMatchObject({ limit: 6, remaining: 3 });
        expect(looked.response?.overallCode).toBe(CODE.OK);
        for (const status of looked.response?.statuses ?? []) {
          expect(status).toEqual({
            code: CODE.OK,
            currentLimit: { name: "anonymous.path./api/", requestsPerUnit: 6, unit: 0 },
            limitRemaining: path?.remaining,
            durationUntilResetMs: (path?.reset ?? 0) * 1000 - NOW,
          });
        }
        expect(await keys()).toBe(held);
        // Nothing was counted: the next counting call is the fourth.
        const counted = await rls.shouldRateLimit(policyCall(undefined), PEER);
        expect(counted.response?.statuses[0]?.limitRemaining).toBe(6 - 4);
      } finally {
        await store.close?.();
      }
    });

    it(`${name}: against a configuration, read the descriptor's counter without writing it`, async () => {
      const { store, keys } = await make();
      const rls = service(store);
      try {
        for (let i = 0; i < 3; i++) await rls.shouldRateLimit(configCall("a", undefined), PEER);
        const held = await keys();
        let looked = await rls.shouldRateLimit(configCall("a", 0), PEER);
        for (let i = 0; i < 50; i++) looked = await rls.shouldRateLimit(configCall("a", 0), PEER);
        expect(looked.response?.statuses[0]).toMatchObject({ code: CODE.OK, limitRemaining: 7 });
        // A value never counted: read as empty, and no counter is made for it.
        const fresh = await rls.shouldRateLimit(configCall("never", 0), PEER);
        expect(fresh.response?.statuses[0]).toMatchObject({ code: CODE.OK, limitRemaining: 10 });
        expect(await keys()).toBe(held);
        const counted = await rls.shouldRateLimit(configCall("a", undefined), PEER);
        expect(counted.response?.statuses[0]?.limitRemaining).toBe(10 - 4);
      } finally {
        await store.close?.();
      }
    });
  }
});
