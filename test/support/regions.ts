/**
 * Regions of a deployment on one machine, with real servers and a real distance between them:
 *
 * - `startRegions`: a dynalite server per region (in a child process of its own, so that the
 *   limiters under test do not share an event loop with the servers), the rate-limit table in
 *   each, the replicator double between them (replicator.ts), and a delay proxy
 *   (delay-proxy.ts) in front of each server through which the other regions reach it;
 * - `startFarRedis`: one redis-server, reached directly by the near region's limiters and
 *   through a delay proxy by the far region's.
 *
 * Loopback only. `delayMs` is one way: a call from one region to another's server takes
 * twice that plus the server's own time.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createRequire } from "node:module";
import { DynamoDbHttpClient } from "../../src/stores/dynamodb/client.js";
import { createRateLimitTable, TEST_CREDENTIALS } from "../dynamodb/harness.js";
import { freePort, startRedis } from "../redis/redis-server.js";
import { type DelayProxy, startDelayProxy } from "./delay-proxy.js";
import { Replicator } from "./replicator.js";

const require = createRequire(import.meta.url);

export interface Region {
  readonly name: string;
  /** This region's own server, as its limiters reach it. */
  readonly endpoint: string;
  readonly client: DynamoDbHttpClient;
}

export interface Regions {
  readonly regions: readonly Region[];
  readonly table: string;
  readonly replicator: Replicator;
  /** How `from`'s limiters reach `to`'s server: directly in-region, else `delayMs` away each way. */
  endpoint(from: string, to: string): string;
  close(): Promise<void>;
}

export async function startRegions(options: {
  readonly names: readonly string[];
  /** One way, between any two regions. */
  readonly delayMs: number;
  /** How often the replicator copies changed items (Global Tables' lag). */
  readonly replicationMs: number;
  readonly table?: string;
}): Promise<Regions> {
  const table = options.table ?? "rate-limits";
  const servers: DynaliteProcess[] = [];
  const proxies: DelayProxy[] = [];
  const clients: DynamoDbHttpClient[] = [];
  let replicator: Replicator | undefined;
  const close = async (): Promise<void> => {
    await replicator?.halt();
    for (const client of clients) client.close();
    await Promise.all(proxies.map((proxy) => proxy.close()));
    await Promise.all(servers.map((server) => server.stop()));
  };
  try {
    for (const _ of options.names) servers.push(await startDynaliteProcess());
    for (const server of servers) proxies.push(await startDelayProxy(server.port, options.delayMs));
    const regions = options.names.map((name, i) => {
      const endpoint = `http://127.0.0.1:${(servers[i] as DynaliteProcess).port}`;
      const client = new DynamoDbHttpClient({
        region: name,
        endpoint,
        credentials: TEST_CREDENTIALS,
      });
      clients.push(client);
      return { name, endpoint, client };
    });
    await Promise.all(regions.map((region) => createRateLimitTable(region.client, table)));
    replicator = new Replicator(table, clients, options.replicationMs);
    const made = replicator;
    return {
      regions,
      table,
      replicator: made,
      endpoint(from, to) {
        const index = options.names.indexOf(to);
        if (index < 0 || !options.names.includes(from))
          throw new Error(`no region ${from} or ${to}`);
        if (from === to) return (regions[index] as Region).endpoint;
        return `http://${(proxies[index] as DelayProxy).address}`;
      },
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}

interface DynaliteProcess {
  readonly port: number;
  stop(): Promise<void>;
}

/** dynalite's own CLI in a child process, in memory, tables ACTIVE at once. */
async function startDynaliteProcess(): Promise<DynaliteProcess> {
  const port = await freePort();
  const child: ChildProcess = spawn(
    process.execPath,
    [
      require.resolve("dynalite/cli.js"),
      "--host",
      "127.0.0.1",
      "--port",
      String(port),
      "--createTableMs",
      "0",
      "--deleteTableMs",
      "0",
      "--updateTableMs",
      "0",
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  await new Promise<void>((resolve, reject) => {
    let output = "";
    const timer = setTimeout(() => reject(new Error("dynalite did not start within 10 s")), 10_000);
    child.once("exit", (code) => reject(new Error(`dynalite exited early (${code})`)));
    child.stdout?.on("data", (chunk: Buffer) => {
      output += chunk.toString("utf8");
      if (output.includes("listening")) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
  return {
    port,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill("SIGTERM");
      }),
  };
}

export interface FarRedis {
  /** `redis://` as the region beside the server reaches it. */
  readonly nearUrl: string;
  /** Through the delay proxy: the region `delayMs` away each way. */
  readonly farUrl: string;
  close(): Promise<void>;
}

/** One redis-server (a primary in one region) and a delay proxy in front of it for another. */
export async function startFarRedis(delayMs: number): Promise<FarRedis> {
  const { server, cleanup } = await startRedis();
  const proxy = await startDelayProxy(server.port, delayMs);
  return {
    nearUrl: server.url,
    farUrl: `redis://${proxy.address}`,
    async close() {
      await proxy.close();
      await cleanup();
    },
  };
}
