import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { createInterface, type Interface } from "node:readline";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AlgorithmName } from "../../src/core/types.js";
import { createLimiter } from "../../src/limiter.js";
import { definePolicy } from "../../src/policy/load.js";
import { type RedisStore, redisStoreFromUrl } from "../../src/stores/redis.js";
import { type RedisServer, startRedis } from "./redis-server.js";

const ALGORITHMS: AlgorithmName[] = ["fixed-window", "sliding-window", "token-bucket"];
const WORKER = fileURLToPath(new URL("./gateway-worker.ts", import.meta.url));

let server: RedisServer;
let cleanup: () => Promise<void>;
let store: RedisStore;

beforeAll(async () => {
  ({ server, cleanup } = await startRedis());
  store = redisStoreFromUrl(server.url);
  await store.ready();
});

afterAll(async () => {
  await store?.close();
  await cleanup?.();
});

function tally(reasons: readonly string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const reason of reasons) counts[reason] = (counts[reason] ?? 0) + 1;
  return counts;
}

describe("exactness under concurrency, one gateway", () => {
  for (const algorithm of ALGORITHMS) {
    it(`${algorithm}: 1,000 concurrent requests against a limit of 100 admit exactly 100`, async () => {
      const limiter = createLimiter({
        store,
        policy: definePolicy({
          budget: "10s",
          tiers: { anonymous: { global: { limit: 100, window: "1d", algorithm } } },
        }),
      });
      const before = store.roundTrips;
      const verdicts = await Promise.all(
        Array.from({ length: 1000 }, () =>
          limiter.check({ ip: `10.1.0.${ALGORITHMS.indexOf(algorithm)}`, path: "/api/items" }),
        ),
      );
      expect(tally(verdicts.map((verdict) => verdict.reason))).toEqual({
        "within-limit": 100,
        "over-limit": 900,
      });
      // Requests of the same tick share a script call: never more than one per request.
      const roundTrips = store.roundTrips - before;
      expect(roundTrips).toBeGreaterThan(0);
      expect(roundTrips).toBeLessThanOrEqual(1000);
    });
  }
});

class Worker {
  readonly #child: ChildProcessWithoutNullStreams;
  readonly #lines: Interface;
  readonly #pending: ((line: string) => void)[] = [];

  constructor(url: string) {
    this.#child = spawn(process.execPath, ["--import", "tsx", WORKER, url], {
      stdio: ["pipe", "pipe", "pipe"],
    });
    this.#lines = createInterface({ input: this.#child.stdout });
    this.#lines.on("line", (line) => this.#pending.shift()?.(line));
  }

  next(timeoutMs = 30_000): Promise<string> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("gateway worker did not answer")), timeoutMs);
      this.#pending.push((line) => {
        clearTimeout(timer);
        resolve(line);
      });
    });
  }

  send(line: string): void {
    this.#child.stdin.write(`${line}\n`);
  }

  stop(): Promise<void> {
    if (this.#child.exitCode !== null) return Promise.resolve();
    return new Promise((resolve) => {
      this.#child.once("exit", () => resolve());
      this.#child.stdin.end();
      setTimeout(() => this.#child.kill("SIGKILL"), 5000).unref();
    });
  }
}

describe("exactness under concurrency, two gateway processes sharing one Redis", () => {
  const workers: Worker[] = [];

  beforeAll(async () => {
    workers.push(new Worker(server.url), new Worker(server.url));
    const ready = await Promise.all(workers.map((worker) => worker.next(60_000)));
    expect(ready).toEqual(["ready", "ready"]);
  }, 90_000);

  afterAll(async () => {
    await Promise.all(workers.map((worker) => worker.stop()));
  });

  for (const algorithm of ALGORITHMS) {
    it(`${algorithm}: 2 x 500 concurrent requests against a limit of 100 admit exactly 100`, async () => {
      const ip = `10.2.0.${ALGORITHMS.indexOf(algorithm)}`;
      const answers = workers.map((worker) => worker.next());
      for (const worker of workers) worker.send(`go ${algorithm} 500 ${ip}`);
      const tallies = (await Promise.all(answers)).map(
        (line) => JSON.parse(line) as Record<string, number>,
      );
      const admitted = tallies.reduce((sum, counts) => sum + (counts["within-limit"] ?? 0), 0);
      const refused = tallies.reduce((sum, counts) => sum + (counts["over-limit"] ?? 0), 0);
      expect({ admitted, refused }).toEqual({ admitted: 100, refused: 900 });
    });
  }
});
