/**
 * Test harness: real `redis-server` processes on free loopback ports, without persistence,
 * and a real 3-master Redis Cluster built with `redis-cli --cluster create`.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { Redis } from "ioredis";

const run = promisify(execFile);

function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/** A free loopback port; with `clusterBus`, port + 10000 is free too. */
export async function freePort(clusterBus = false): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = await new Promise<number>((resolve, reject) => {
      const server = createServer();
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => {
        const address = server.address();
        const found = typeof address === "object" && address !== null ? address.port : 0;
        server.close(() => resolve(found));
      });
    });
    if (!clusterBus) return port;
    if (port + 10000 < 65536 && (await portIsFree(port + 10000))) return port;
  }
  throw new Error("no free port pair for a cluster node");
}

export class RedisServer {
  readonly port: number;
  readonly #extraArgs: readonly string[];
  readonly #dir: string;
  #process: ChildProcess | undefined;

  constructor(port: number, dir: string, extraArgs: readonly string[] = []) {
    this.port = port;
    this.#dir = dir;
    this.#extraArgs = extraArgs;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get pid(): number | undefined {
    return this.#process?.pid;
  }

  async start(): Promise<void> {
    const child = spawn(
      "redis-server",
      [
        "--port",
        String(this.port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        this.#dir,
        ...this.#extraArgs,
      ],
      { stdio: "ignore" },
    );
    this.#process = child;
    await waitForPing(this.port, child);
  }

  /** SIGKILL: the server vanishes mid-request, as in a crash. */
  kill(): Promise<void> {
    return this.#stop("SIGKILL");
  }

  stop(): Promise<void> {
    return this.#stop("SIGTERM");
  }

  #stop(signal: NodeJS.Signals): Promise<void> {
    const child = this.#process;
    this.#process = undefined;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) {
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => child.kill("SIGKILL"), 3000);
      child.once("exit", () => {
        clearTimeout(timer);
        resolve();
      });
      child.kill(signal);
    });
  }
}

async function waitForPing(port: number, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`redis-server on port ${port} exited early`);
    const probe = new Redis({
      port,
      host: "127.0.0.1",
      lazyConnect: true,
      enableOfflineQueue: false,
      retryStrategy: () => null,
      maxRetriesPerRequest: 0,
    });
    probe.on("error", () => {});
    try {
      await probe.connect();
      if ((await probe.ping()) === "PONG") return;
    } catch {
      // Not listening yet.
    } finally {
      probe.disconnect();
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`redis-server on port ${port} did not answer PING within 10 s`);
}

/** One redis-server in a temporary directory, with extra command-line arguments if given. */
export async function startRedis(
  extraArgs: readonly string[] = [],
): Promise<{ server: RedisServer; cleanup: () => Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), "edgelimit-redis-"));
  let server = new RedisServer(await freePort(), dir, extraArgs);
  // The port found free may be taken before redis-server binds it (another test's server, on a
  // busy machine); redis-server then exits at once, and another port is tried.
  for (let attempt = 1; ; attempt++) {
    try {
      await server.start();
      break;
    } catch (error) {
      if (attempt === 3 || !String(error).includes("exited early")) throw error;
      server = new RedisServer(await freePort(), dir, extraArgs);
    }
  }
  return {
    server,
    cleanup: async () => {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface TestCluster {
  readonly nodes: readonly RedisServer[];
  readonly url: string;
  cleanup(): Promise<void>;
}

/**
 * A cluster of `masters` masters (three by default), no replicas, every slot assigned,
 * `cluster_state:ok` on every node. `redis-cli --cluster create` wants three masters at least:
 * a single master is given every slot itself. `nodeTimeoutMs` is how long a master may be
 * unreachable before the others mark it failed (and, with no replica, stop serving every slot).
 * The default is Redis's own, 15 s: the tests that load the machine on purpose (the bursts
 * under CPU contention) must not see a healthy master, slow to answer gossip, taken out of the
 * Cluster; a test of a master's failure passes the time it waits for.
 */
export async function startCluster(
  options: { masters?: number; nodeTimeoutMs?: number } = {},
): Promise<TestCluster> {
  const masters = options.masters ?? 3;
  const dir = mkdtempSync(join(tmpdir(), "edgelimit-cluster-"));
  const nodes: RedisServer[] = [];
  const cleanup = async (): Promise<void> => {
    await Promise.all(nodes.map((node) => node.stop()));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (let i = 0; i < masters; i++) {
      const port = await freePort(true);
      const node = new RedisServer(port, dir, [
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        join(dir, `nodes-${port}.conf`),
        "--cluster-node-timeout",
        String(options.nodeTimeoutMs ?? 15_000),
        // A lone master, never met by another node, would otherwise announce no address.
        "--cluster-announce-ip",
        "127.0.0.1",
      ]);
      nodes.push(node);
      await node.start();
    }
    if (masters === 1) {
      const port = String((nodes[0] as RedisServer).port);
      await run("redis-cli", ["-p", port, "cluster", "addslotsrange", "0", "16383"]);
    } else {
      await run("redis-cli", [
        "--cluster",
        "create",
        ...nodes.map((node) => `127.0.0.1:${node.port}`),
        "--cluster-replicas",
        "0",
        "--cluster-yes",
      ]);
    }
    const deadline = Date.now() + 15_000;
    for (const node of nodes) {
      for (;;) {
        const { stdout } = await run("redis-cli", ["-p", String(node.port), "cluster", "info"]);
        if (stdout.includes("cluster_state:ok")) break;
        if (Date.now() > deadline) throw new Error("cluster did not reach cluster_state:ok");
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  } catch (error) {
    await cleanup();
    throw error;
  }
  return {
    nodes,
    url: `redis+cluster://${nodes.map((node) => `127.0.0.1:${node.port}`).join(",")}`,
    cleanup,
  };
}
