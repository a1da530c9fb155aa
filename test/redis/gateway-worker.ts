/**
 * A tiny gateway process for the two-process exactness test: its own ioredis client, its own
 * limiters. Prints "ready"; for each line "go <algorithm> <requests> <ip>" on stdin it fires
 * that many requests at once and prints a JSON line with the verdicts by reason.
 */
import { createInterface } from "node:readline";
import type { AlgorithmName } from "../../src/core/types.js";
import { createLimiter, type Limiter } from "../../src/limiter.js";
import { definePolicy } from "../../src/policy/load.js";
import { redisStoreFromUrl } from "../../src/stores/redis.js";

const url = process.argv[2] as string;
const store = redisStoreFromUrl(url);
await store.ready();
const limiters = new Map<string, Limiter>();
function limiterFor(algorithm: AlgorithmName): Limiter {
  let limiter = limiters.get(algorithm);
  if (limiter === undefined) {
    limiter = createLimiter({
      store,
      policy: definePolicy({
        budget: "10s",
        tiers: { anonymous: { global: { limit: 100, window: "1d", algorithm } } },
      }),
    });
    limiters.set(algorithm, limiter);
  }
  return limiter;
}
process.stdout.write("ready\n");
for await (const line of createInterface({ input: process.stdin })) {
  const [command, algorithm, requests, ip] = line.trim().split(" ");
  if (command !== "go") break;
  const limiter = limiterFor(algorithm as AlgorithmName);
  const verdicts = await Promise.all(
    Array.from({ length: Number(requests) }, () => limiter.check({ ip, path: "/api/items" })),
  );
  const tally: Record<string, number> = {};
  for (const verdict of verdicts) tally[verdict.reason] = (tally[verdict.reason] ?? 0) + 1;
  process.stdout.write(`${JSON.stringify(tally)}\n`);
}
await store.close();
