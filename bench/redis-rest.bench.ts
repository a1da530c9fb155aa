/**
 * Redis over HTTP: @upstash/redis (the protocol's own client) against edgelimit's small client
 * (src/stores/redis-rest/client.ts), in what an edge bundle weighs and in what a call costs.
 *
 * Weight: each entry is bundled as edge runtimes bundle middleware (esbuild, browser platform,
 * ESM, minified, the `edge-light` condition), and its bytes and gzip bytes are printed: the
 * client alone making an EVALSHA call, and the whole `edgelimit/redis-rest` store.
 *
 * Cost: both clients send the store's EVALSHA (one fixed-window counter) to the same REST
 * bridge in front of the same redis-server (test/support/redis-rest-bridge.ts), one call at a
 * time, in alternating rounds; the per-call p50 and p99 of each, and their ratio. The bridge
 * and Redis are the same for both, so the difference is the clients' own work.
 *
 *   npx tsx bench/redis-rest.bench.ts [calls per round=500] [rounds=4]
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { gzipSync } from "node:zlib";
import { Redis as UpstashRedis } from "@upstash/redis";
import * as esbuild from "esbuild";
import { APPLY_COUNTERS_LUA, APPLY_COUNTERS_SHA } from "../src/stores/redis/script.js";
import { RedisRestClient } from "../src/stores/redis-rest/client.js";
import { startRedis } from "../test/redis/redis-server.js";
import { startRedisRestBridge } from "../test/support/redis-rest-bridge.js";

const callsPerRound = Number(process.argv[2] ?? 500);
const rounds = Number(process.argv[3] ?? 4);
const dir = mkdtempSync(join(tmpdir(), "edgelimit-rest-bench-"));
const dist = resolve("dist");

const ENTRIES: Record<string, string> = {
  "@upstash/redis, an EVALSHA": `import { Redis } from "@upstash/redis";
export function call(url, token, sha, keys, args) {
  return new Redis({ url, token }).evalsha(sha, keys, args);
}`,
  "edgelimit's client, an EVALSHA": `import { RedisRestClient } from ${JSON.stringify(join(dist, "stores/redis-rest/client.js"))};
export function call(url, token, sha, keys, args) {
  return new RedisRestClient({ url, token }).command(["EVALSHA", sha, keys.length, ...keys, ...args]);
}`,
  "edgelimit/redis-rest, the whole store": `export { redisRestStore } from ${JSON.stringify(join(dist, "stores/redis-rest.js"))};`,
};

async function weigh(): Promise<void> {
  console.log("edge bundle (esbuild --platform=browser --minify, edge-light):");
  for (const [name, source] of Object.entries(ENTRIES)) {
    const entry = join(dir, "entry.mjs");
    const outfile = join(dir, "out.mjs");
    writeFileSync(entry, source);
    await esbuild.build({
      entryPoints: [entry],
      bundle: true,
      platform: "browser",
      format: "esm",
      minify: true,
      conditions: ["edge-light"],
      outfile,
      nodePaths: [resolve("node_modules")],
      logLevel: "silent",
    });
    const bytes = readFileSync(outfile);
    console.log(
      `  ${name.padEnd(40)} ${String(bytes.length).padStart(7)} B   gzip ${String(gzipSync(bytes).length).padStart(6)} B`,
    );
  }
}

function quantile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number;
}

async function race(): Promise<void> {
  const { server, cleanup } = await startRedis();
  const bridge = await startRedisRestBridge(server.url);
  try {
    const ours = new RedisRestClient({ url: bridge.url, token: bridge.token });
    // Plain JSON replies for both: the bridge does not base64-encode, and the script's reply is
    // integers either way.
    const upstash = new UpstashRedis({
      url: bridge.url,
      token: bridge.token,
      responseEncoding: false,
    });
    await ours.command(["SCRIPT", "LOAD", APPLY_COUNTERS_LUA]);
    // One request (the batch count), the server clock, one counter: fixed window, limit, window, cost, enforce.
    const args = ["1", "", "1", "f", "1000000000", "60000", "1", "e"];
    const clients: Record<string, (i: number) => Promise<unknown>> = {
      "@upstash/redis": (i) => upstash.evalsha(APPLY_COUNTERS_SHA, [`bench:{u${i % 64}}`], args),
      edgelimit: (i) =>
        ours.command(["EVALSHA", APPLY_COUNTERS_SHA, 1, `bench:{e${i % 64}}`, ...args]),
    };
    const samples: Record<string, number[]> = { "@upstash/redis": [], edgelimit: [] };
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 === 0 ? Object.keys(clients) : Object.keys(clients).reverse();
      for (const name of order) {
        const call = clients[name] as (i: number) => Promise<unknown>;
        for (let i = 0; i < callsPerRound; i++) {
          const started = performance.now();
          await call(i);
          if (round > 0) samples[name]?.push(performance.now() - started);
        }
      }
    }
    console.log(
      `one EVALSHA through the bridge, ${callsPerRound} calls x ${rounds - 1} rounds each (a warm-up round dropped):`,
    );
    const p50: Record<string, number> = {};
    for (const [name, times] of Object.entries(samples)) {
      const sorted = [...times].sort((a, b) => a - b);
      p50[name] = quantile(sorted, 0.5);
      console.log(
        `  ${name.padEnd(16)} p50 ${(quantile(sorted, 0.5) * 1000).toFixed(0)} µs   p99 ${(quantile(sorted, 0.99) * 1000).toFixed(0)} µs`,
      );
    }
    console.log(
      `  edgelimit / @upstash/redis p50: ${((p50.edgelimit as number) / (p50["@upstash/redis"] as number)).toFixed(2)}x`,
    );
  } finally {
    await bridge.close();
    await cleanup();
  }
}

try {
  await weigh();
  await race();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
