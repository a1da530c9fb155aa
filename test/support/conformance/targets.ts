/**
 * The stores the conformance suite runs over, each a real one: the memory store, a
 * redis-server, a 3-master Redis Cluster, Redis over HTTP (the Upstash REST protocol, through a
 * bridge to a real redis-server), DynamoDB (dynalite, over HTTP with our node:https client, and
 * over fetch with edgelimit/dynamodb-fetch's) and the Durable
 * Object in workerd (Miniflare). A target gives one store instance per "process"
 * (its own client, its own caches), all on one backend, as a fleet of gateways has.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Miniflare } from "miniflare";
import { bundleWorker } from "../../../scripts/build-cloudflare.js";
import type { CounterSpec, CounterState, Store } from "../../../src/core/types.js";
import { DynamoDbStore } from "../../../src/stores/dynamodb.js";
import { DynamoDbFetchStore } from "../../../src/stores/dynamodb-fetch.js";
import { MemoryStore } from "../../../src/stores/memory.js";
import { RedisStore } from "../../../src/stores/redis.js";
import { RedisRestStore } from "../../../src/stores/redis-rest.js";
import { createRateLimitTable, startDynalite, TEST_CREDENTIALS } from "../../dynamodb/harness.js";
import { startCluster, startRedis } from "../../redis/redis-server.js";
import { startRedisRestBridge } from "../redis-rest-bridge.js";

export interface Target {
  readonly name: string;
  /** Whether the store can reset counters (`Store.reset`). */
  readonly canReset: boolean;
  /**
   * `count` store instances ("processes") on one backend; each call gives fresh counters (a key
   * prefix or table of its own), so that histories never meet.
   */
  stores(count: number): Promise<Store[]>;
  cleanup(): Promise<void>;
}

let fresh = 0;
/** A name no earlier history used. */
function freshName(): string {
  fresh++;
  return `h${process.pid}x${fresh}`;
}

/**
 * The memory store reached as a remote store is: asynchronously, and so with the block cache,
 * the decision budget and (for hybrid rules) the hybrid layer in front of it, as the engine puts
 * them in front of any store that is not in the process. Every "process" shares the one store.
 */
class RemoteMemory implements Store {
  readonly name = "memory";
  readonly #memory: MemoryStore;

  constructor(memory: MemoryStore) {
    this.#memory = memory;
  }

  async apply(counters: readonly CounterSpec[], now: number): Promise<CounterState[]> {
    await new Promise((resolve) => setImmediate(resolve));
    return this.#memory.applySync(counters, now);
  }

  reset(counters: readonly CounterSpec[]): Promise<void> {
    return this.#memory.reset(counters);
  }
}

export async function memoryTarget(): Promise<Target> {
  return {
    name: "memory",
    canReset: true,
    async stores(count) {
      const memory = new MemoryStore();
      return Array.from({ length: count }, () => new RemoteMemory(memory));
    },
    async cleanup() {},
  };
}

/** Redis with the caller's clock: the histories drive time, and skew is theirs to choose. */
function redisStores(url: string, count: number): Promise<RedisStore[]> {
  const prefix = `${freshName()}:`;
  const stores = Array.from(
    { length: count },
    () => new RedisStore({ client: url, prefix, clock: "caller", timeoutMs: 5000 }),
  );
  return Promise.all(stores.map((store) => store.ready().then(() => store)));
}

export async function redisTarget(): Promise<Target> {
  const { server, cleanup } = await startRedis();
  const opened: RedisStore[] = [];
  return {
    name: "redis",
    canReset: true,
    async stores(count) {
      const stores = await redisStores(server.url, count);
      opened.push(...stores);
      return stores;
    },
    async cleanup() {
      await Promise.all(opened.map((store) => store.close()));
      await cleanup();
    },
  };
}

export async function clusterTarget(): Promise<Target> {
  const cluster = await startCluster();
  const opened: RedisStore[] = [];
  return {
    name: "redis-cluster",
    canReset: true,
    async stores(count) {
      const stores = await redisStores(cluster.url, count);
      for (const store of stores) store.client.on("error", () => {});
      opened.push(...stores);
      return stores;
    },
    async cleanup() {
      await Promise.all(opened.map((store) => store.close()));
      await cluster.cleanup();
    },
  };
}

export async function redisRestTarget(): Promise<Target> {
  const { server, cleanup } = await startRedis();
  const bridge = await startRedisRestBridge(server.url);
  const opened: RedisRestStore[] = [];
  return {
    name: "redis-rest",
    canReset: true,
    async stores(count) {
      const prefix = `${freshName()}:`;
      const stores = Array.from(
        { length: count },
        () =>
          new RedisRestStore({
            url: bridge.url,
            token: bridge.token,
            prefix,
            clock: "caller",
            timeoutMs: 5000,
          }),
      );
      await Promise.all(stores.map((store) => store.ready()));
      opened.push(...stores);
      return stores;
    },
    async cleanup() {
      await Promise.all(opened.map((store) => store.close()));
      await bridge.close();
      await cleanup();
    },
  };
}

/** DynamoDB on dynalite, each "process" a store of `make`'s on one fresh table. */
async function dynamoTarget(
  name: string,
  make: (options: {
    table: string;
    region: string;
    endpoint: string;
    credentials: typeof TEST_CREDENTIALS;
    requestTimeoutMs: number;
  }) => Store & { close(): Promise<void> },
): Promise<Target> {
  const local = await startDynalite();
  const opened: (Store & { close(): Promise<void> })[] = [];
  return {
    name,
    canReset: false,
    async stores(count) {
      const table = freshName();
      await createRateLimitTable(local.client, table);
      const stores = Array.from({ length: count }, () =>
        make({
          table,
          region: "us-east-1",
          endpoint: local.endpoint,
          credentials: TEST_CREDENTIALS,
          requestTimeoutMs: 5000,
        }),
      );
      opened.push(...stores);
      return stores;
    },
    async cleanup() {
      await Promise.all(opened.map((store) => store.close()));
      await local.close();
    },
  };
}

export function dynamodbTarget(): Promise<Target> {
  return dynamoTarget("dynamodb", (options) => new DynamoDbStore(options));
}

export function dynamodbFetchTarget(): Promise<Target> {
  return dynamoTarget("dynamodb-fetch", (options) => new DynamoDbFetchStore(options));
}

/** The Worker the Durable Object target runs: `CloudflareStore.apply` in workerd, over HTTP. */
const STORE_WORKER = join(import.meta.dirname, "store-worker.ts");

/**
 * The Cloudflare store and its Durable Object (`EdgelimitCounter`) in the real workerd runtime.
 * Each "process" is a client in Node that asks a Worker to apply counters; the Worker's store
 * routes each exact counter to its object, as the example Worker does.
 */
export async function durableObjectTarget(): Promise<Target> {
  const dir = await mkdtemp(join(tmpdir(), "edgelimit-conformance-"));
  const script = join(dir, "worker.js");
  await bundleWorker(STORE_WORKER, script);
  const miniflare = new Miniflare({
    modules: true,
    scriptPath: script,
    modulesRoot: dir,
    compatibilityDate: "2025-06-01",
    durableObjects: { EDGELIMIT_COUNTER: { className: "EdgelimitCounter", useSQLite: true } },
    durableObjectsPersist: join(dir, "objects"),
  });
  await miniflare.ready;
  return {
    name: "durable-object",
    canReset: false,
    async stores(count) {
      const prefix = freshName();
      return Array.from({ length: count }, () => new WorkerdStore(miniflare, prefix));
    },
    async cleanup() {
      await miniflare.dispose();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The Durable Objects with areas (adapters/cloudflare/areas.ts): the "processes" are isolates in
 * North America (the lease area), Europe and Asia in turn; hybrid rules count through each
 * area's object of the subject, the far areas' with a holder and an allowance.
 */
export async function durableObjectAreasTarget(): Promise<Target> {
  const target = await durableObjectTarget();
  const continents = ["NA", "EU", "AS"];
  return {
    ...target,
    name: "durable-object-areas",
    async stores(count) {
      const [first] = (await target.stores(1)) as WorkerdStore[];
      return Array.from(
        { length: count },
        (_, i) =>
          new WorkerdStore(
            first?.miniflare as Miniflare,
            first?.prefix as string,
            continents[i % 3],
          ),
      );
    },
  };
}

class WorkerdStore implements Store {
  readonly name = "cloudflare";
  readonly miniflare: Miniflare;
  /** Keeps histories apart: every key is prefixed (in its subject, so objects differ too). */
  readonly prefix: string;
  /** With areas: the continent of this isolate's requests. */
  readonly #continent: string | undefined;
  /** With areas, the store counts hybrid rules itself (no hybrid layer in front of it). */
  readonly traits: Store["traits"];

  constructor(miniflare: Miniflare, prefix: string, continent?: string) {
    this.miniflare = miniflare;
    this.prefix = prefix;
    this.#continent = continent;
    this.traits = continent === undefined ? undefined : { hybrid: true };
  }

  async apply(counters: readonly CounterSpec[], now: number): Promise<CounterState[]> {
    const prefixed = counters.map((counter) => ({
      ...counter,
      key: `${this.prefix}${counter.key}`,
      subject: `${this.prefix}${counter.subject}`,
    }));
    const response = await this.miniflare.dispatchFetch("https://store.test/apply", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ counters: prefixed, now, continent: this.#continent }),
    });
    if (!response.ok)
      throw new Error(`workerd store answered ${response.status}: ${await response.text()}`);
    return (await response.json()) as CounterState[];
  }
}

/**
 * DynamoDB as a deployment over regions uses it for hybrid counting: the "processes" are in two
 * regions (alternately), reservations go to a lease table in the first, whose processes reserve
 * there directly, and the second's share a region holder (core/hybrid/holder.ts, opt-in
 * `regionHolder`) in a holders table, all on one
 * dynalite. Exact rules count in a table every region shares, as one replica would.
 */
export function dynamodbRegionsTarget(): Promise<Target> {
  return holdersTarget("dynamodb-regions", ["us-east-1", "eu-west-1"], false);
}

/**
 * Hybrid counting's region allowances (DynamoDB `regionAllowance`): processes in three regions
 * (us-east-1 the lease region), each far region's first request of a subject in a window
 * answered from its allowance, a subject at its limit taking back the unspent ones. One dynalite
 * holds every region's tables (each region's items are its own by key); the regions count their
 * exact rules in items of their own (`globalRegions`).
 */
export function dynamodbAllowanceTarget(): Promise<Target> {
  return holdersTarget("dynamodb-allowance", ["us-east-1", "eu-west-1", "ap-southeast-1"], true);
}

/**
 * Processes in `regions` in turn on one dynalite, the first the lease region, with region
 * holders, and with `allowances` the regions' allowances too.
 */
async function holdersTarget(
  name: string,
  regions: readonly string[],
  allowances: boolean,
): Promise<Target> {
  const local = await startDynalite();
  const opened: DynamoDbStore[] = [];
  const extra = allowances
    ? {
        globalRegions: regions,
        regionAllowance: true,
        regionEndpoints: Object.fromEntries(regions.map((region) => [region, local.endpoint])),
      }
    : {};
  return {
    name,
    canReset: false,
    async stores(count) {
      const [table, leases, holders] = [freshName(), freshName(), freshName()];
      await Promise.all(
        [table, leases, holders].map((table) => createRateLimitTable(local.client, table)),
      );
      const stores = Array.from(
        { length: count },
        (_, i) =>
          new DynamoDbStore({
            table,
            region: regions[i % regions.length] as string,
            endpoint: local.endpoint,
            credentials: TEST_CREDENTIALS,
            requestTimeoutMs: 5000,
            leaseRegion: regions[0],
            leaseTable: leases,
            leaseEndpoint: local.endpoint,
            regionHolder: true,
            holderTable: holders,
            ...extra,
          }),
      );
      opened.push(...stores);
      return stores;
    },
    async cleanup() {
      await Promise.all(opened.map((store) => store.close()));
      await local.close();
    },
  };
}
