/**
 * Core benchmark: decisions per second on one core, 10,000 keys, same run for every contender.
 *
 *   npx tsx bench/core.bench.ts            (or: npm run bench -- core)
 *
 * Contenders, each deciding "may this key make one more request in this 60 s window?":
 * - a plain Map fixed window (the ceiling: no eviction bound, no algorithm choice, no API);
 * - edgelimit's memory store: one counter through `applyOneSync` (the same unit of work as the
 *   peers' one key), the array form `applySync` (what the limiter calls with all of a
 *   request's counters) and the async `Store.apply` (what a generic caller awaits);
 * - express-rate-limit's MemoryStore (`await increment(key)`, then compare with the limit);
 * - rate-limiter-flexible's RateLimiterMemory (`await consume(key)`).
 * And the full policy check: `limiter.check()` with the seed's policy (identity from the
 * socket address, a per-path rule and the global rule, headers built).
 */
import { spawnSync } from "node:child_process";
import { cpus } from "node:os";
import { fileURLToPath } from "node:url";
import { MemoryStore as ExpressMemoryStore } from "express-rate-limit";
import { RateLimiterMemory } from "rate-limiter-flexible";
import type { CounterSpec } from "../src/core/types.js";
import { createLimiter } from "../src/limiter.js";
import { loadPolicy } from "../src/policy/load.js";
import { memoryStore } from "../src/stores/memory.js";

const KEYS = 10_000;
const LIMIT = 1_000_000_000; // Nobody is refused: we measure the bookkeeping, not the refusal path.
const ROUND_MS = Number(process.env.BENCH_ROUND_MS ?? 1500);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const keys = Array.from(
  { length: KEYS },
  (_, i) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`,
);

type Contender = { name: string; run: (iterations: number) => Promise<void> | void; batch: number };

/** Runs a contender for about ROUND_MS and returns decisions per second. */
async function measure(contender: Contender): Promise<number> {
  const started = performance.now();
  let done = 0;
  while (performance.now() - started < ROUND_MS) {
    await contender.run(contender.batch);
    done += contender.batch;
  }
  return done / ((performance.now() - started) / 1000);
}

function plainMap(): Contender {
  const map = new Map<string, { window: number; count: number }>();
  let i = 0;
  return {
    name: "plain Map fixed window (ceiling)",
    batch: 100_000,
    run(iterations) {
      const window = Math.floor(Date.now() / 60_000);
      for (let n = 0; n < iterations; n++) {
        const key = keys[i++ % KEYS] as string;
        const entry = map.get(key);
        if (entry === undefined || entry.window !== window) map.set(key, { window, count: 1 });
        else if (++entry.count > LIMIT) throw new Error("refused");
      }
    },
  };
}

function counters(): CounterSpec[] {
  return keys.map((key) => ({
    key: `ip:${key}|bench|global`,
    subject: `ip:${key}`,
    algorithm: "fixed-window",
    limit: LIMIT,
    window: { ms: 60_000 },
    cost: 1,
    mode: "enforce",
    ruleId: "bench",
    namespace: "bench",
  }));
}

function ourOne(): Contender {
  const store = memoryStore();
  const specs = counters();
  let i = 0;
  return {
    name: "edgelimit memoryStore (one counter, applyOneSync)",
    batch: 100_000,
    run(iterations) {
      const now = Date.now();
      for (let n = 0; n < iterations; n++) {
        const state = store.applyOneSync(specs[i++ % KEYS] as CounterSpec, now);
        if (!state.allowed) throw new Error("refused");
      }
    },
  };
}

function ourSync(): Contender {
  const store = memoryStore();
  const specs = counters().map((counter) => [counter]);
  let i = 0;
  return {
    name: "edgelimit memoryStore (applySync, array of counters)",
    batch: 100_000,
    run(iterations) {
      const now = Date.now();
      for (let n = 0; n < iterations; n++) {
        const [state] = store.applySync(specs[i++ % KEYS] as CounterSpec[], now);
        if (!state?.allowed) throw new Error("refused");
      }
    },
  };
}

function ourAsync(): Contender {
  const store = memoryStore();
  const specs = counters().map((counter) => [counter]);
  let i = 0;
  return {
    name: "edgelimit memoryStore (await apply)",
    batch: 50_000,
    async run(iterations) {
      for (let n = 0; n < iterations; n++) {
        const [state] = await store.apply(specs[i++ % KEYS] as CounterSpec[], Date.now());
        if (!state?.allowed) throw new Error("refused");
      }
    },
  };
}

function expressRateLimit(): Contender {
  const store = new ExpressMemoryStore();
  store.init({ windowMs: 60_000 } as Parameters<ExpressMemoryStore["init"]>[0]);
  let i = 0;
  return {
    name: "express-rate-limit MemoryStore",
    batch: 50_000,
    async run(iterations) {
      for (let n = 0; n < iterations; n++) {
        const { totalHits } = await store.increment(keys[i++ % KEYS] as string);
        if (totalHits > LIMIT) throw new Error("refused");
      }
    },
  };
}

function rateLimiterFlexible(): Contender {
  const limiter = new RateLimiterMemory({ points: LIMIT, duration: 60 });
  let i = 0;
  return {
    name: "rate-limiter-flexible RateLimiterMemory",
    batch: 50_000,
    async run(iterations) {
      for (let n = 0; n < iterations; n++) await limiter.consume(keys[i++ % KEYS] as string);
    },
  };
}

function fullPolicyCheck(): Contender {
  process.env.EDGELIMIT_JWT_SECRET ??= "bench-secret-bench-secret-bench-secret";
  const policy = loadPolicy(
    new URL("../examples/policies/cloudfront.yaml", import.meta.url).pathname,
  );
  // The seed's limits, raised so that the benchmark measures admitted requests.
  const raised = { ...policy, rules: policy.rules.map((rule) => ({ ...rule, limit: LIMIT })) };
  const limiter = createLimiter({ policy: raised, store: memoryStore() });
  const requests = keys.map((ip) => ({
    ip,
    method: "GET",
    path: "/api/search?q=shoes",
    headers: { host: "shop.example" },
  }));
  let i = 0;
  return {
    name: "full policy check (limiter.check, seed policy, 2 rules)",
    batch: 20_000,
    async run(iterations) {
      for (let n = 0; n < iterations; n++) {
        const verdict = await limiter.check(requests[i++ % KEYS] as (typeof requests)[number]);
        if (verdict.action !== "allow") throw new Error(`refused: ${verdict.reason}`);
      }
    },
  };
}

const all = [
  plainMap(),
  ourOne(),
  ourSync(),
  ourAsync(),
  expressRateLimit(),
  rateLimiterFlexible(),
  fullPolicyCheck(),
];

const child = process.env.BENCH_CONTENDER;
if (child !== undefined) {
  // One contender in a fresh process: warm up, measure once, print the rate.
  const contender = all.find((candidate) => candidate.name === child);
  if (contender === undefined) throw new Error(`unknown contender ${child}`);
  await contender.run(KEYS * 3);
  await contender.run(KEYS * 30);
  process.stdout.write(`${await measure(contender)}\n`);
  process.exit(0);
}

// Each contender runs in its own process, rounds interleaved: one contender's garbage or
// JIT feedback cannot slow the next, and load from other jobs spreads over all of them.
const only = process.env.BENCH_ONLY;
const contenders = only === undefined ? all : all.filter((c) => c.name.includes(only));
const results = new Map<string, number[]>();
for (let round = 0; round < ROUNDS; round++) {
  for (const contender of contenders) {
    const run = spawnSync(process.execPath, ["--import", "tsx", fileURLToPath(import.meta.url)], {
      env: { ...process.env, BENCH_CONTENDER: contender.name },
      encoding: "utf8",
    });
    if (run.status !== 0) throw new Error(`${contender.name} failed: ${run.stderr}`);
    const rate = Number(run.stdout.trim());
    results.set(contender.name, [...(results.get(contender.name) ?? []), rate]);
  }
}

const median = (values: number[]) =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;
const rate = (name: string) => median(results.get(name) ?? [0]);
const express = rate("express-rate-limit MemoryStore");
const flexible = rate("rate-limiter-flexible RateLimiterMemory");
console.log(`machine: ${cpus().length} cores, ${cpus()[0]?.model}, node ${process.version}`);
console.log(
  `${KEYS} keys, ${ROUNDS} interleaved rounds of ${ROUND_MS} ms, each contender in its own process; median decisions/s (one core):\n`,
);
console.log("| contender | decisions/s | vs express-rate-limit | vs rate-limiter-flexible |");
console.log("|---|---:|---:|---:|");
for (const contender of contenders) {
  const value = rate(contender.name);
  console.log(
    `| ${contender.name} | ${(value / 1e6).toFixed(2)} M | ${(value / express).toFixed(2)}x | ${(value / flexible).toFixed(2)}x |`,
  );
}
