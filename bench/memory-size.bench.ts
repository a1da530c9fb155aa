/**
 * What the memory store holds in memory when it is full: 3 M distinct client addresses through
 * a policy of one global and one path rule (two counters each, 6 M counters offered), through
 * `limiter.check`, at `maxKeys` 200,000, the default 1,000,000 and 2,000,000. Each size runs in
 * a process of its own (`--expose-gc`), and reports `heapUsed` after a full collection and the
 * process's RSS, beside a process that built the same limiter and checked nothing.
 *
 *   npx tsx bench/memory-size.bench.ts        (or: npm run bench -- memory-size)
 */
import { spawnSync } from "node:child_process";
import { cpus } from "node:os";
import { fileURLToPath } from "node:url";
import { createLimiter } from "../src/limiter.js";
import { definePolicy } from "../src/policy/load.js";
import { memoryStore } from "../src/stores/memory.js";

const CLIENTS = Number(process.env.BENCH_CLIENTS ?? 3_000_000);
const SIZES = [200_000, 1_000_000, 2_000_000];

interface Reading {
  readonly maxKeys: number;
  readonly keys: number;
  readonly heapMb: number;
  readonly rssMb: number;
}

async function measure(maxKeys: number, requests: number): Promise<Reading> {
  const store = memoryStore({ maxKeys });
  const limiter = createLimiter({
    store,
    policy: definePolicy({
      // Hour-long windows: no counter expires (and is swept) while the store fills.
      defaults: { window: "1h" },
      tiers: { anonymous: { global: 60, paths: { "/api/export": 3 } } },
    }),
  });
  const now = Date.now();
  for (let i = 0; i < requests; i++) {
    const ip = `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
    const verdict = limiter.decide({ ip, path: "/api/export", headers: {} });
    if (verdict instanceof Promise) await verdict;
    if (i % 100_000 === 0 && Date.now() - now > 600_000) break;
  }
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  gc?.();
  const usage = process.memoryUsage();
  return {
    maxKeys,
    keys: store.size,
    heapMb: usage.heapUsed / 1e6,
    rssMb: usage.rss / 1e6,
  };
}

function child(maxKeys: number, requests: number): Reading {
  const result = spawnSync(
    process.execPath,
    ["--expose-gc", "--max-old-space-size=8192", "--import", "tsx", fileURLToPath(import.meta.url)],
    {
      env: { ...process.env, BENCH_CHILD: `${maxKeys}:${requests}` },
      encoding: "utf8",
      maxBuffer: 1 << 20,
    },
  );
  if (result.status !== 0) throw new Error(`child ${maxKeys} failed: ${result.stderr}`);
  return JSON.parse(result.stdout.trim().split("\n").pop() as string) as Reading;
}

if (process.env.BENCH_CHILD !== undefined) {
  const [maxKeys, requests] = process.env.BENCH_CHILD.split(":").map(Number) as [number, number];
  console.log(JSON.stringify(await measure(maxKeys, requests)));
} else {
  const empty = child(SIZES[1] as number, 0);
  console.log(
    `machine: ${cpus().length} cores, ${cpus()[0]?.model.trim()}, node ${process.version}`,
  );
  console.log(
    `${CLIENTS.toLocaleString("en")} distinct addresses, two counters each, through limiter.decide:\n`,
  );
  console.log("| maxKeys | keys held | heapUsed after GC | per key | RSS |");
  console.log("|---:|---:|---:|---:|---:|");
  console.log(
    `| (no request) | 0 | ${empty.heapMb.toFixed(0)} MB | | ${empty.rssMb.toFixed(0)} MB |`,
  );
  for (const maxKeys of SIZES) {
    const reading = child(maxKeys, CLIENTS);
    const perKey = ((reading.heapMb - empty.heapMb) * 1e6) / reading.keys;
    console.log(
      `| ${maxKeys.toLocaleString("en")} | ${reading.keys.toLocaleString("en")} | ${reading.heapMb.toFixed(0)} MB | ${perKey.toFixed(0)} B | ${reading.rssMb.toFixed(0)} MB |`,
    );
  }
}
