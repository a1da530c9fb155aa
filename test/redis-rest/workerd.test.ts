/**
 * `edgelimit/redis-rest` as the edge runs it: the built package bundled for the browser platform
 * (no Node built-ins, no npm package) and run in workerd through Miniflare, two separate
 * runtimes counting in one real redis-server through the REST bridge, as two Workers locations
 * (or a Worker and a Next.js middleware) would share one Upstash database.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startRedis } from "../redis/redis-server.js";
import { bundleForEdge, runInWorkerd } from "../support/edge-bundle.js";
import { type RedisRestBridge, startRedisRestBridge } from "../support/redis-rest-bridge.js";

const dir = mkdtempSync(join(tmpdir(), "edgelimit-rest-workerd-"));
const dist = resolve("dist");

const WORKER = `
import { createLimiter, definePolicy } from ${JSON.stringify(join(dist, "index.js"))};
import { withRateLimit } from ${JSON.stringify(join(dist, "adapters", "fetch.js"))};
import { redisRestStore } from ${JSON.stringify(join(dist, "stores", "redis-rest.js"))};

let handler;
export default {
  fetch(request, env) {
    // Bindings arrive with the first request: build the limiter then, once per isolate.
    handler ??= withRateLimit(() => new Response("from the origin"), {
      limiter: createLimiter({
        policy: definePolicy({
          version: 1,
          budget: "2s",
          identity: { ip: { source: "header", header: "cf-connecting-ip" } },
          tiers: { anonymous: { global: { limit: 4, window: "1d" } } },
        }),
        store: redisRestStore({ url: env.REDIS_REST_URL, token: env.REDIS_REST_TOKEN }),
      }),
    });
    return handler(request, env);
  },
};
`;

let bridge: RedisRestBridge;
let stopRedis: () => Promise<void>;
let outfile: string;
let nodeBuiltins: string[];
let packages: string[];

beforeAll(async () => {
  const { server, cleanup } = await startRedis();
  stopRedis = cleanup;
  bridge = await startRedisRestBridge(server.url);
  writeFileSync(join(dir, "worker.mjs"), WORKER);
  ({ outfile } = await bundleForEdge(join(dir, "worker.mjs"), dir));
  // The store's own weight: what the entry point adds to a bundle that has the limiter already.
  const alone = join(dir, "store-alone");
  writeFileSync(
    join(dir, "store-alone.mjs"),
    `export { redisRestStore } from ${JSON.stringify(join(dist, "stores", "redis-rest.js"))};`,
  );
  ({ nodeBuiltins, packages } = await bundleForEdge(join(dir, "store-alone.mjs"), alone));
});

afterAll(async () => {
  await bridge?.close();
  await stopRedis?.();
  rmSync(dir, { recursive: true, force: true });
});

describe("edgelimit/redis-rest in workerd", () => {
  it("bundles for the browser platform with no Node built-in and no npm package", () => {
    expect(nodeBuiltins).toEqual([]);
    expect(packages).toEqual([]);
  });

  it("counts across two runtimes in one Redis: 4 of 8 requests admitted, then 429", async () => {
    const bindings = { REDIS_REST_URL: bridge.url, REDIS_REST_TOKEN: bridge.token };
    const runtimes: Miniflare[] = [];
    try {
      for (let i = 0; i < 2; i++) runtimes.push(await runInWorkerd(outfile, dir, bindings));
      const statuses: number[] = [];
      for (let i = 0; i < 8; i++) {
        const response = await (runtimes[i % 2] as Miniflare).dispatchFetch(
          "https://example.test/api/items",
          { headers: { "cf-connecting-ip": "198.51.100.77" } },
        );
        await response.text();
        statuses.push(response.status);
      }
      expect(statuses).toEqual([200, 200, 200, 200, 429, 429, 429, 429]);
      expect(bridge.requests["/"]).toBeGreaterThanOrEqual(4);
      // Another client has a counter of its own.
      const other = await (runtimes[1] as Miniflare).dispatchFetch(
        "https://example.test/api/items",
        { headers: { "cf-connecting-ip": "198.51.100.78" } },
      );
      expect(other.status).toBe(200);
      expect(other.headers.get("x-ratelimit-remaining")).toBe("3");
      await other.text();
    } finally {
      await Promise.all(runtimes.map((runtime) => runtime.dispose()));
    }
  });
});
