/**
 * Operators' overrides in Redis over HTTP from a Worker: the built package bundled for the
 * browser platform and run in workerd (Miniflare) against a real redis-server through the REST
 * bridge. workerd runs nothing between requests, so the limiter's requests refresh its copy
 * (core/override-watch.ts) and `withRateLimit` hands each read to the request's `waitUntil`.
 * Overrides are set from Node (the CLI and the library); each must apply in the Worker within
 * its refresh (`REFRESH_MS`, short here) plus a round trip, and a request must send no command
 * of its own for them (Redis `INFO commandstats`).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Redis } from "ioredis";
import type { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLimiter, type Limiter } from "../../src/limiter.js";
import { definePolicy } from "../../src/policy/load.js";
import { redisRestStore } from "../../src/stores/redis-rest.js";
import { startRedis } from "../redis/redis-server.js";
import { bundleForEdge, runInWorkerd } from "../support/edge-bundle.js";
import { type RedisRestBridge, startRedisRestBridge } from "../support/redis-rest-bridge.js";
import { overrideCli, workerOverrideCases } from "../support/worker-overrides.js";

const dir = mkdtempSync(join(tmpdir(), "edgelimit-rest-overrides-workerd-"));
const policyFile = join(dir, "policy.json");
const dist = resolve("dist");
const REFRESH_MS = 200;
/** The refresh, a round trip, and a busy machine's lag. */
const BOUND_MS = 5_000;

// An hour's window: no test waits for a new one, and each uses addresses of its own.
const POLICY = {
  version: 1,
  budget: "2s",
  identity: { ip: { source: "header", header: "cf-connecting-ip" } },
  tiers: { anonymous: { global: { limit: 3, window: "1h" } } },
  overrides: { maxLimit: 100 },
} as const;

/**
 * The limiter is built at module scope, where workerd lets no I/O begin: the first read of the
 * overrides begins with the first request. `fetch` is `withRateLimit`'s handler itself, so it
 * gets the request's `ctx` as a Worker's module `fetch` does.
 */
const worker = (url: string, token: string) => `
import { createLimiter, definePolicy } from ${JSON.stringify(join(dist, "index.js"))};
import { withRateLimit } from ${JSON.stringify(join(dist, "adapters", "fetch.js"))};
import { redisRestStore } from ${JSON.stringify(join(dist, "stores", "redis-rest.js"))};

const limiter = createLimiter({
  policy: definePolicy(${JSON.stringify(POLICY)}),
  store: redisRestStore({ url: ${JSON.stringify(url)}, token: ${JSON.stringify(token)} }),
  overrides: { refreshMs: ${REFRESH_MS} },
});
export default { fetch: withRateLimit(() => new Response("from the origin"), { limiter }) };
`;

let bridge: RedisRestBridge;
let stopRedis: () => Promise<void>;
let redisUrl: string;
let redis: Redis;
let outfile: string;
let operator: Limiter;
/** The isolate of the first test, fresh then; the later ones reuse it (a start takes ~1.5 s). */
let runtime: Miniflare | undefined;

beforeAll(async () => {
  const started = await startRedis();
  stopRedis = started.cleanup;
  redisUrl = started.server.url;
  redis = new Redis(redisUrl);
  bridge = await startRedisRestBridge(redisUrl);
  writeFileSync(join(dir, "worker.mjs"), worker(bridge.url, bridge.token));
  writeFileSync(policyFile, JSON.stringify(POLICY));
  ({ outfile } = await bundleForEdge(join(dir, "worker.mjs"), dir));
  // An operator's limiter in Node on the same database (it reads its own copy once an hour).
  operator = createLimiter({
    policy: definePolicy(POLICY),
    store: redisRestStore({ url: bridge.url, token: bridge.token }),
    overrides: { refreshMs: 3_600_000 },
  });
}, 60_000);

afterAll(async () => {
  operator?.close();
  await runtime?.dispose();
  redis?.disconnect();
  await bridge?.close();
  await stopRedis?.();
  rmSync(dir, { recursive: true, force: true });
});

/** The isolate (fresh at its first use). */
async function isolate(): Promise<Miniflare> {
  runtime ??= await runInWorkerd(outfile, dir);
  return runtime;
}

async function send(ip: string) {
  const response = await (await isolate()).dispatchFetch("https://example.test/api/items", {
    headers: { "cf-connecting-ip": ip },
  });
  await response.text();
  return { status: response.status, limit: response.headers.get("x-ratelimit-limit") };
}

/** `edgelimit override …` in a child process, against the store through the REST bridge. */
function cli(args: string[]) {
  return overrideCli(`redis+http://:${bridge.token}@${new URL(bridge.url).host}`, policyFile)(args);
}

/** Calls of each Redis command since the server started. */
async function commandCalls(): Promise<Record<string, number>> {
  const info = await redis.info("commandstats");
  const calls: Record<string, number> = {};
  for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm))
    calls[match[1] as string] = Number(match[2]);
  return calls;
}

describe("overrides of Redis over HTTP in a Worker", () => {
  workerOverrideCases({ operator: () => operator, isolate, send, cli, boundMs: BOUND_MS });

  it("a request sends no command for the overrides: at most one version read per refresh per isolate", async () => {
    await send("198.51.100.30"); // warm
    const before = await commandCalls();
    const started = Date.now();
    const requests = 16;
    for (let i = 0; i < requests; i++) {
      expect((await send(`198.51.100.${31 + (i % 8)}`)).status).toBeLessThan(500);
      await new Promise((resolve) => setTimeout(resolve, 30));
    }
    const elapsed = Date.now() - started;
    const after = await commandCalls();
    const delta = (name: string) => (after[name] ?? 0) - (before[name] ?? 0);
    // One counting call per request (the script), and the version reads beside them.
    expect(delta("evalsha") + delta("eval")).toBe(requests);
    expect(delta("hmget")).toBeGreaterThanOrEqual(1);
    expect(delta("hmget")).toBeLessThanOrEqual(Math.floor(elapsed / REFRESH_MS) + 1);
    expect(delta("hmget")).toBeLessThan(requests / 2);
    // Nothing changed meanwhile: the list was not read again.
    expect(delta("hgetall")).toBe(0);
  });
});
