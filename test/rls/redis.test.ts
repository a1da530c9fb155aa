import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type RedisServer,
  startCluster,
  startRedis,
  type TestCluster,
} from "../redis/redis-server.js";
import { HOUR_MS, withinOneWindow } from "../support/windows.js";
import {
  grpcJsClient,
  type RlsClient,
  type RlsProcess,
  startRls,
  upstreamRoot,
} from "./harness.js";

/**
 * `edgelimit rls` counting in a real redis-server and a real 3-master Cluster: two service
 * processes share the counters exactly, all of a request's descriptors are one call (one
 * INCRBY each: fixed windows; on the Cluster too, when they begin with the same entry: the hash
 * tag), and a stalled Redis
 * costs a decision its budget, then the descriptor's fail mode.
 */

const LIMIT = 100;
const CALLS = 1000;
const dir = mkdtempSync(join(tmpdir(), "edgelimit-rls-redis-"));
const configFile = join(dir, "config.yaml");
writeFileSync(
  configFile,
  [
    "domain: shared",
    "descriptors:",
    "  - key: tenant",
    `    rate_limit: { unit: hour, requests_per_unit: ${LIMIT} }`,
    "  - key: remote_address",
    "    rate_limit: { unit: hour, requests_per_unit: 50 }",
    "    descriptors:",
    "      - key: path",
    "        rate_limit: { unit: hour, requests_per_unit: 10 }",
    "  - key: critical",
    "    rate_limit: { unit: hour, requests_per_unit: 10 }",
    "    metadata:",
    "      edgelimit: { failMode: closed }",
    "",
  ].join("\n"),
);
mkdirSync(join(dir, "runtime", "ratelimit", "config"), { recursive: true });
copyFileSync(configFile, join(dir, "runtime", "ratelimit", "config", "config.yaml"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const root = upstreamRoot();
/**
 * The configuration, with a policy that sets only the decision budget (the configuration's
 * counters run under the policy's budget): 15 s, which a shared 2-core machine meets with 1,000
 * calls in flight even while the rest of the suite runs beside it, so that no call is counted
 * in its process instead (`failMode: local`, the default: 174 of 100 admitted once with 5 s at a
 * load average of 11) and the count alone is under test.
 */
const EXACT = ["--config", configFile, "--policy", "test/rls/fixtures/budget.yaml"];
const tenant = (name: string) => ({
  domain: "shared",
  descriptors: [{ entries: [{ key: "tenant", value: name }] }],
});

/** 1,000 calls at once for one descriptor, half through each process; the OKs counted. */
async function admittedOfConcurrentCalls(
  clients: readonly RlsClient[],
  name: string,
): Promise<number> {
  const results = await Promise.all(
    Array.from({ length: CALLS }, (_, index) =>
      (clients[index % clients.length] as RlsClient).shouldRateLimit(tenant(name)),
    ),
  );
  expect(results.filter((result) => result.error !== undefined)).toEqual([]);
  const admitted = results.filter((result) => result.overall_code === "OK");
  // A decision the store failed is answered OK without a count: there must be none.
  expect(admitted.filter((result) => result.statuses?.[0]?.reset_seconds === undefined)).toEqual(
    [],
  );
  return admitted.length;
}

/** Script calls (EVALSHA and EVAL) a redis-server has run since start. */
/**
 * What a node has counted with since it started: script calls, and the `INCRBY`s that count a
 * fixed window without the script (one per descriptor).
 */
async function countingCalls(port: number): Promise<{ scripts: number; increments: number }> {
  const client = new Redis({ port, host: "127.0.0.1", lazyConnect: true });
  await client.connect();
  const stats = await client.info("commandstats");
  client.disconnect();
  let scripts = 0;
  for (const match of stats.matchAll(/cmdstat_(fcall|evalsha|eval):calls=(\d+)/g))
    scripts += Number(match[2]);
  const increments = Number(/cmdstat_incrby:calls=(\d+)/.exec(stats)?.[1] ?? 0);
  return { scripts, increments };
}

/** Counting calls of `after` beyond `before`. */
function since(
  after: { scripts: number; increments: number },
  before: { scripts: number; increments: number },
) {
  return {
    scripts: after.scripts - before.scripts,
    increments: after.increments - before.increments,
  };
}

describe("two rls processes on one redis-server", () => {
  let redis: { server: RedisServer; cleanup: () => Promise<void> };
  let processes: RlsProcess[] = [];
  let clients: RlsClient[] = [];
  /** A third process with the default budget (50 ms), for the stall, set up by variables alone. */
  let budgeted: RlsClient;

  beforeAll(async () => {
    redis = await startRedis();
    processes = await Promise.all([
      startRls([...EXACT, "--store", redis.server.url]),
      startRls([...EXACT, "--store", redis.server.url]),
      // A manifest written for envoyproxy/ratelimit: the configuration and Redis from its variables.
      startRls([], {
        env: {
          RUNTIME_ROOT: join(dir, "runtime"),
          RUNTIME_SUBDIRECTORY: "ratelimit",
          REDIS_SOCKET_TYPE: "tcp",
          REDIS_URL: `127.0.0.1:${redis.server.port}`,
        },
      }),
    ]);
    clients = processes.map((rls) => grpcJsClient(rls.grpcPort, root));
    budgeted = clients.pop() as RlsClient;
  });

  afterAll(async () => {
    for (const client of clients) client.close();
    budgeted?.close();
    await Promise.all(processes.map((rls) => rls.stop()));
    await redis?.cleanup();
  });

  it("admits exactly the limit of 1,000 concurrent calls for one descriptor", async () => {
    // Hour windows: the calls (seconds) and the next test's refusals of "single" in one hour.
    await withinOneWindow(HOUR_MS, 15_000);
    expect(await admittedOfConcurrentCalls(clients, "single")).toBe(LIMIT);
  });

  it("answers a descriptor it saw refused from its block cache, without counting in Redis", async () => {
    const client = clients[0] as RlsClient;
    const before = await countingCalls(redis.server.port);
    for (let i = 0; i < 20; i++) {
      expect((await client.shouldRateLimit(tenant("single"))).overall_code).toBe("OVER_LIMIT");
    }
    expect(since(await countingCalls(redis.server.port), before)).toEqual({
      scripts: 0,
      increments: 0,
    });
  });

  it("counts each of a request's descriptors once, with an INCRBY and no script call", async () => {
    const client = clients[0] as RlsClient;
    const before = await countingCalls(redis.server.port);
    const result = await client.shouldRateLimit({
      domain: "shared",
      descriptors: [
        { entries: [{ key: "remote_address", value: "203.0.113.9" }] },
        {
          entries: [
            { key: "remote_address", value: "203.0.113.9" },
            { key: "path", value: "/x" },
          ],
        },
        { entries: [{ key: "tenant", value: "one-call" }] },
      ],
    });
    expect(result.statuses?.map((status) => status.limit_remaining)).toEqual([49, 9, LIMIT - 1]);
    // Fixed windows (envoyproxy/ratelimit's units): one pipeline, one INCRBY per descriptor.
    expect(since(await countingCalls(redis.server.port), before)).toEqual({
      scripts: 0,
      increments: 3,
    });
  });

  it("answers within the budget while Redis is stalled: OK where it fails open, UNAVAILABLE where closed", async () => {
    const client = budgeted;
    const pid = redis.server.pid as number;
    process.kill(pid, "SIGSTOP");
    try {
      const started = performance.now();
      const open = await client.shouldRateLimit(tenant("stalled"));
      const openMs = performance.now() - started;
      const closed = await client.shouldRateLimit({
        domain: "shared",
        descriptors: [{ entries: [{ key: "critical", value: "c" }] }],
      });
      expect(open.overall_code).toBe("OK");
      expect(open.statuses?.[0]?.current_limit?.requests_per_unit).toBe(LIMIT);
      expect(closed.error?.code).toBe("UNAVAILABLE");
      // The 50 ms budget, with room for a loaded machine: far below the reference's 10 s.
      expect(openMs).toBeLessThan(1000);
    } finally {
      process.kill(pid, "SIGCONT");
    }
  });
});

describe("two rls processes on a 3-master Redis Cluster", () => {
  let cluster: TestCluster;
  let processes: RlsProcess[] = [];
  let clients: RlsClient[] = [];

  beforeAll(async () => {
    cluster = await startCluster();
    processes = await Promise.all([
      startRls([...EXACT, "--store", cluster.url]),
      startRls([...EXACT, "--store", cluster.url]),
    ]);
    clients = processes.map((rls) => grpcJsClient(rls.grpcPort, root));
  }, 60_000);

  afterAll(async () => {
    for (const client of clients) client.close();
    await Promise.all(processes.map((rls) => rls.stop()));
    await cluster?.cleanup();
  });

  it("admits exactly the limit of 1,000 concurrent calls for one descriptor", async () => {
    // Hour windows: the thousand calls take seconds on a busy machine, all in one hour.
    await withinOneWindow(HOUR_MS, 15_000);
    expect(await admittedOfConcurrentCalls(clients, "cluster")).toBe(LIMIT);
  });

  it("sends descriptors that begin with the same entry to one master, in one call", async () => {
    const client = clients[0] as RlsClient;
    const calls = () => Promise.all(cluster.nodes.map((node) => countingCalls(node.port)));
    const before = await calls();
    const result = await client.shouldRateLimit({
      domain: "shared",
      descriptors: [
        { entries: [{ key: "remote_address", value: "198.51.100.4" }] },
        {
          entries: [
            { key: "remote_address", value: "198.51.100.4" },
            { key: "path", value: "/y" },
          ],
        },
      ],
    });
    expect(result.statuses?.map((status) => status.limit_remaining)).toEqual([49, 9]);
    const after = await calls();
    const counted = after.map((node, i) => since(node, before[i] as typeof node));
    // Both descriptors' increments on the master of their hash tag, none elsewhere.
    expect(counted.map((node) => node.increments).sort()).toEqual([0, 0, 2]);
    expect(counted.every((node) => node.scripts === 0)).toBe(true);
  });
});
