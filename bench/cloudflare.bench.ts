/**
 * Binding-only against binding + Durable Object, in local emulation (Miniflare 4 / workerd).
 * The same Worker answers four kinds of request; each is timed end to end from Node:
 *   origin      no rule matches: the Worker and the dispatch path alone (baseline);
 *   binding     anonymous /api/: the native binding only (seed 003's cheap filter);
 *   binding+DO  a pro user on /api/: binding, then that user's Durable Object (warm);
 *   cold DO     a new user each request: binding, then a Durable Object created on first use.
 * Local figures: the binding and the object live on this machine, so this measures the work
 * each path adds, not Cloudflare's network (a real Durable Object adds a round trip to
 * wherever it lives).
 *
 *   npx tsx bench/cloudflare.bench.ts [requestsPerScenario]
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { SignJWT } from "jose";
import { Miniflare } from "miniflare";
import { buildCloudflareWorker, EXAMPLE_ENTRY } from "../scripts/build-cloudflare.js";
import { parsePolicy } from "../src/policy/load.js";

const SECRET = "bench-secret-0123456789-0123456789";
const REQUESTS = Number(process.argv[2] ?? 400);
const POLICY = `
version: 1
identity:
  ip: { source: header, header: cf-connecting-ip }
  user:
    jwt: { algorithms: [HS256], secret: { env: EDGELIMIT_JWT_SECRET }, userClaim: sub, planClaim: plan }
namespaces:
  api:
    match: { path: /api/ }
    rules:
      - { name: rate, key: user-or-ip, limit: 1000000, window: 60s, backend: approximate }
      - { name: quota, key: user, plans: [pro], limit: 1000000, window: 1mo, backend: exact }
`;

function token(userId: string): Promise<string> {
  return new SignJWT({ plan: "pro" })
    .setProtectedHeader({ alg: "HS256" })
    .setSubject(userId)
    .setExpirationTime("10m")
    .sign(new TextEncoder().encode(SECRET));
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
}

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), "edgelimit-cf-bench-"));
  const script = join(dir, "worker.js");
  await buildCloudflareWorker({
    policy: parsePolicy(POLICY),
    entry: EXAMPLE_ENTRY,
    outfile: script,
  });
  const miniflare = new Miniflare({
    modules: true,
    scriptPath: script,
    modulesRoot: dirname(script),
    compatibilityDate: "2025-06-01",
    ratelimits: {
      LIMIT_LOGIN: { namespace_id: "1001", simple: { limit: 5, period: 60 } },
      LIMIT_API: { namespace_id: "1002", simple: { limit: 1_000_000, period: 60 } },
    },
    durableObjects: { EDGELIMIT_COUNTER: { className: "EdgelimitCounter", useSQLite: true } },
    durableObjectsPersist: join(dir, "objects"),
    bindings: { EDGELIMIT_JWT_SECRET: SECRET },
  });
  try {
    await miniflare.ready;
    const warmToken = await token("u_warm");
    const coldTokens = await Promise.all(
      Array.from({ length: REQUESTS }, (_, i) => token(`u_cold_${i}`)),
    );
    const scenarios: Record<string, (i: number) => [string, Record<string, string>]> = {
      origin: (i) => ["/health", { "cf-connecting-ip": `10.1.${i >> 8}.${i & 255}` }],
      binding: (i) => ["/api/x", { "cf-connecting-ip": `10.2.${i >> 8}.${i & 255}` }],
      "binding+DO": () => [
        "/api/x",
        { "cf-connecting-ip": "10.3.0.1", authorization: `Bearer ${warmToken}` },
      ],
      "cold DO": (i) => [
        "/api/x",
        { "cf-connecting-ip": "10.4.0.1", authorization: `Bearer ${coldTokens[i]}` },
      ],
    };
    const results: Record<string, { p50: number; p99: number; mean: number }> = {};
    for (const [name, request] of Object.entries(scenarios)) {
      // Warm-up: the JIT, the token cache, and for binding+DO the object itself.
      for (let i = 0; i < 20; i++) {
        const [path, headers] = request(name === "cold DO" ? REQUESTS - 1 - i : i);
        await (await miniflare.dispatchFetch(`https://bench.test${path}`, { headers })).text();
      }
      const times: number[] = [];
      for (let i = 0; i < REQUESTS - 20; i++) {
        const [path, headers] = request(i);
        const started = performance.now();
        const response = await miniflare.dispatchFetch(`https://bench.test${path}`, { headers });
        await response.text();
        times.push(performance.now() - started);
        if (response.status !== 200) throw new Error(`${name}: status ${response.status}`);
      }
      times.sort((a, b) => a - b);
      results[name] = {
        p50: percentile(times, 50),
        p99: percentile(times, 99),
        mean: times.reduce((sum, time) => sum + time, 0) / times.length,
      };
    }
    const base = results.origin?.p50 ?? 1;
    console.log(`requests per scenario: ${REQUESTS - 20} (sequential, after 20 warm-up)`);
    console.log("scenario      p50 ms   p99 ms  mean ms  p50 / origin");
    for (const [name, { p50, p99, mean }] of Object.entries(results)) {
      console.log(
        `${name.padEnd(12)} ${p50.toFixed(2).padStart(7)} ${p99.toFixed(2).padStart(8)} ${mean.toFixed(2).padStart(8)} ${(p50 / base).toFixed(2).padStart(13)}`,
      );
    }
  } finally {
    await miniflare.dispose();
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
