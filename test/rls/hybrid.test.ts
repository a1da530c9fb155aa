import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RedisServer, startRedis } from "../redis/redis-server.js";
import { type DelayProxy, startDelayProxy } from "../support/delay-proxy.js";
import { HOUR_MS, withinOneWindow } from "../support/windows.js";
import {
  grpcJsClient,
  type RlsClient,
  type RlsProcess,
  startRls,
  upstreamRoot,
} from "./harness.js";

/**
 * `counting: hybrid` in `edgelimit rls`, in both modes, with two service processes on one real
 * redis-server: a descriptor (config mode, the `edgelimit` block) or a rule (policy mode) is
 * admitted from capacity each process reserved ahead. Never beyond the limit across the two,
 * and a busy one costs Redis a small fraction of a call per decision, not one call each.
 */

const LIMIT = 100;
const BUSY_LIMIT = 1_000_000;
const dir = mkdtempSync(join(tmpdir(), "edgelimit-rls-hybrid-"));
const configFile = join(dir, "config.yaml");
writeFileSync(
  configFile,
  [
    "domain: hybrid",
    "descriptors:",
    "  - key: tenant",
    `    rate_limit: { unit: hour, requests_per_unit: ${LIMIT} }`,
    "    metadata:",
    "      edgelimit: { counting: hybrid }",
    "  - key: busy",
    `    rate_limit: { unit: minute, requests_per_unit: ${BUSY_LIMIT} }`,
    "    metadata:",
    "      edgelimit: { counting: hybrid, algorithm: sliding-window }",
    "  - key: plain",
    `    rate_limit: { unit: hour, requests_per_unit: ${LIMIT} }`,
    "",
  ].join("\n"),
);
/**
 * Calls of any other domain are decided by this policy: the same two limits as hybrid rules.
 * Its 15 s budget is one a loaded 2-core machine meets with 1,000 calls in flight, so that no
 * reservation misses it (a hybrid rule then refuses: docs/policy.md, "When the store fails")
 * and the count alone is under test, as in redis.test.ts.
 */
const policyFile = join(dir, "policy.yaml");
writeFileSync(
  policyFile,
  [
    "version: 1",
    "budget: 15s",
    "identity:",
    "  ip: { source: x-forwarded-for, trustedProxies: [127.0.0.0/8] }",
    "defaults: { counting: hybrid, window: 1h }",
    "tiers:",
    "  anonymous:",
    `    global: { limit: ${BUSY_LIMIT}, window: 1m }`,
    "    paths:",
    `      /scarce/: ${LIMIT}`,
    "",
  ].join("\n"),
);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const byConfig = (key: string, value: string) => ({
  domain: "hybrid",
  descriptors: [{ entries: [{ key, value }] }],
});
const byPolicy = (address: string, path: string) => ({
  domain: "web",
  descriptors: [
    {
      entries: [
        { key: "remote_address", value: address },
        { key: ":path", value: path },
      ],
    },
  ],
});

/** `calls` calls of `request`, `inFlight` at a time, alternating between the processes' clients. */
async function codesOf(
  clients: readonly RlsClient[],
  request: Record<string, unknown>,
  calls: number,
  inFlight: number,
): Promise<string[]> {
  const codes: string[] = [];
  for (let sent = 0; sent < calls; sent += inFlight) {
    const batch = Math.min(inFlight, calls - sent);
    const results = await Promise.all(
      Array.from({ length: batch }, (_, index) =>
        (clients[index % clients.length] as RlsClient).shouldRateLimit(request),
      ),
    );
    expect(results.filter((result) => result.error !== undefined)).toEqual([]);
    for (const result of results) codes.push(result.overall_code as string);
  }
  return codes;
}

/** Commands a redis-server has run since start, by name (`evalsha`, `incrby`, ...). */
async function commandCalls(port: number): Promise<Map<string, number>> {
  const client = new Redis({ port, host: "127.0.0.1", lazyConnect: true });
  await client.connect();
  const stats = await client.info("commandstats");
  client.disconnect();
  const calls = new Map<string, number>();
  for (const match of stats.matchAll(/cmdstat_([a-z|]+):calls=(\d+)/g))
    calls.set(match[1] as string, Number(match[2]));
  return calls;
}

/** Commands that count or read counters (not `info`, the connections' own setup) since `before`. */
function countingCommandsSince(
  after: ReadonlyMap<string, number>,
  before: ReadonlyMap<string, number>,
): number {
  let total = 0;
  for (const [name, calls] of after) {
    if (/^(info|client|hello|ping|select|script|function|cluster)/.test(name)) continue;
    total += calls - (before.get(name) ?? 0);
  }
  return total;
}

describe("counting: hybrid in two rls processes on one redis-server", () => {
  let redis: { server: RedisServer; cleanup: () => Promise<void> };
  let processes: RlsProcess[] = [];
  let clients: RlsClient[] = [];

  beforeAll(async () => {
    redis = await startRedis();
    const args = ["--config", configFile, "--policy", policyFile, "--store", redis.server.url];
    processes = await Promise.all([startRls(args), startRls(args)]);
    const root = upstreamRoot();
    clients = processes.map((rls) => grpcJsClient(rls.grpcPort, root));
  });

  afterAll(async () => {
    for (const client of clients) client.close();
    await Promise.all(processes.map((rls) => rls.stop()));
    await redis?.cleanup();
  });

  it.each([
    ["a configured descriptor", byConfig("tenant", "one")],
    ["a policy's rule", byPolicy("203.0.113.7", "/scarce/x")],
  ])(
    "admits exactly the limit of 1,000 concurrent calls for %s, half through each process",
    async (_, request) => {
      // Hour windows: the thousand calls take seconds on a busy machine, all in one hour.
      await withinOneWindow(HOUR_MS, 15_000);
      const codes = await codesOf(clients, request, 1000, 1000);
      expect(codes.filter((code) => code === "OK")).toHaveLength(LIMIT);
    },
  );

  it.each([
    ["a configured descriptor", byConfig("busy", "one")],
    ["a policy's rule", byPolicy("203.0.113.8", "/busy")],
  ])(
    "costs Redis far below one command per decision once %s is busy: it spends what it reserved",
    async (_, request) => {
      // The busy rule's window is a minute: a run that crossed into the next one would start
      // its reservations over (each process's first is its cost alone, then its rate builds up),
      // which once made 0.2 commands a call. Within 10 s of a minute's end, start after it.
      const left = 60_000 - (Date.now() % 60_000);
      if (left < 10_000) await new Promise((resolve) => setTimeout(resolve, left + 50));
      // The first calls reserve what they cost; then each process reserves ahead at the rate seen.
      await codesOf(clients, request, 200, 20);
      const before = await commandCalls(redis.server.port);
      const codes = await codesOf(clients, request, 2000, 20);
      const commands = countingCommandsSince(await commandCalls(redis.server.port), before);
      expect(codes.every((code) => code === "OK")).toBe(true);
      // 0.005 to 0.025 (10 to 50 commands for 2,000 calls). A process sizes its reservations
      // by the rate it admitted the subject at since it first saw it in the window (when that
      // was measured from the window's start, this figure went from 0.01 at an hour's start to
      // 0.3 a quarter of an hour in; test/core/hybrid-late-busy.test.ts). Exact costs 1 to 4 a
      // call.
      expect(commands / codes.length).toBeLessThan(0.15);
    },
  );
});

describe("counting: hybrid in rls while Redis answers slower than the budget", () => {
  let redis: { server: RedisServer; cleanup: () => Promise<void> };
  let slow: DelayProxy;
  let rls: RlsProcess;
  let client: RlsClient;

  beforeAll(async () => {
    redis = await startRedis();
    // 400 ms a round trip: far beyond the default 50 ms budget, well within the store's own
    // 1 s call timeout, so the store is slow and never failed.
    slow = await startDelayProxy(redis.server.port, 200);
    rls = await startRls(["--config", configFile, "--store", `redis://${slow.address}`]);
    client = grpcJsClient(rls.grpcPort, upstreamRoot());
  });

  afterAll(async () => {
    client?.close();
    await rls?.stop();
    await slow?.close();
    await redis?.cleanup();
  });

  it("refuses a hybrid descriptor that needs a reservation, where an exact one is counted locally", async () => {
    // failMode local (the default) on both: the exact descriptor's count here is paid to the
    // store later; the hybrid one's reservation may still take the window's last units.
    const hybrid = await client.shouldRateLimit(byConfig("tenant", "slow"));
    const exact = await client.shouldRateLimit(byConfig("plain", "slow"));
    expect(hybrid.overall_code).toBe("OVER_LIMIT");
    expect(hybrid.statuses?.[0]?.limit_remaining).toBe(0);
    expect(exact.overall_code).toBe("OK");
    expect(exact.statuses?.[0]?.limit_remaining).toBe(LIMIT - 1);
  });
});
