/**
 * `edgelimit serve --store redis+http://…`: the gateway counting in Redis over HTTP, as a
 * gateway without a socket to Redis (or a team on Upstash) runs it. The real CLI in a child
 * process, the REST bridge in front of a real redis-server.
 */
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startOrigin, type TestServer } from "../gateway/helpers.js";
import { type RedisServer, startRedis } from "../redis/redis-server.js";
import { type RedisRestBridge, startRedisRestBridge } from "../support/redis-rest-bridge.js";
import { startServe } from "../support/serve-process.js";

const dir = mkdtempSync(join(tmpdir(), "edgelimit-rest-serve-"));
let server: RedisServer;
let stopRedis: () => Promise<void>;
let bridge: RedisRestBridge;
let origin: TestServer;
const children: ChildProcess[] = [];

beforeAll(async () => {
  ({ server, cleanup: stopRedis } = await startRedis());
  bridge = await startRedisRestBridge(server.url);
  origin = await startOrigin((_req, res) => res.end("origin"));
  writeFileSync(
    join(dir, "policy.yaml"),
    "version: 1\ntiers:\n  anonymous:\n    global: { limit: 3, window: 1d }\n",
  );
});

afterAll(async () => {
  for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
  await origin?.close();
  await bridge?.close();
  await stopRedis?.();
  rmSync(dir, { recursive: true, force: true });
});

async function gateway(store: string, env: Record<string, string> = {}) {
  const served = await startServe({
    policy: join(dir, "policy.yaml"),
    upstream: origin.url,
    args: ["--store", store, "--log-sample", "0"],
    env,
  });
  children.push(served.child);
  return { base: served.base, output: served.output };
}

describe("serve --store redis+http://", () => {
  it("counts in Redis over HTTP, with the token in the URL (never printed) or in the environment", async () => {
    const endpoint = bridge.url.replace(/^http:\/\//, "");
    const first = await gateway(`redis+http://:${bridge.token}@${endpoint}`);
    const second = await gateway(`redis+http://${endpoint}`, {
      EDGELIMIT_REDIS_REST_TOKEN: bridge.token,
    });
    expect(first.output()).toContain(`store redis+http://***@${endpoint}`);
    expect(first.output()).not.toContain(bridge.token);
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) {
      const response = await fetch(`${(i % 2 === 0 ? first : second).base}/api/items`);
      await response.arrayBuffer();
      statuses.push(response.status);
    }
    expect(statuses).toEqual([200, 200, 200, 429, 429]);
    const admin = new Redis({ port: server.port, host: "127.0.0.1" });
    try {
      expect(await admin.keys("el:{ip:127.0.0.1}*")).toHaveLength(1);
    } finally {
      admin.disconnect();
    }
  }, 60_000);
});
