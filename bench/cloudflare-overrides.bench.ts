/**
 * What operators' overrides cost a Worker's request, in local emulation (Miniflare 4 / workerd):
 * the same exact rule (a warm Durable Object per address) timed end to end from Node, with
 *   none        no override in the `{overrides}` object;
 *   1,000 held  1,000 overrides for other addresses, held by the isolate;
 *   own limit   an override of this address's limit.
 * Each scenario also counts the calls the overrides object answered meanwhile (the Worker's
 * refresh at the default 5 s), to show a request makes none of its own.
 *
 *   npx tsx bench/cloudflare-overrides.bench.ts [requestsPerScenario]
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Miniflare } from "miniflare";
import { bundleWorker } from "../scripts/build-cloudflare.js";
import { parsePolicy } from "../src/policy/load.js";

const REQUESTS = Number(process.argv[2] ?? 300);
const TOKEN = "bench-admin-token-0123456789abcdef";
const POLICY = `
version: 1
identity:
  ip: { source: header, header: cf-connecting-ip }
namespaces:
  api:
    match: { path: /api/ }
    key: ip
    limit: 1000000
    window: 1h
    backend: exact
`;

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
}

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), "edgelimit-cf-overrides-bench-"));
  const script = join(dir, "worker.js");
  await bundleWorker("test/cloudflare/fixtures/overrides-worker.ts", script, {
    define: {
      EDGELIMIT_POLICY: JSON.stringify(parsePolicy(POLICY)),
      EDGELIMIT_REFRESH_MS: "5000",
    },
  });
  const miniflare = new Miniflare({
    modules: true,
    scriptPath: script,
    modulesRoot: dir,
    compatibilityDate: "2025-06-01",
    ratelimits: { LIMIT_LOGIN: { namespace_id: "1001", simple: { limit: 5, period: 60 } } },
    durableObjects: { EDGELIMIT_COUNTER: { className: "CountingCounter", useSQLite: true } },
    durableObjectsPersist: join(dir, "objects"),
    bindings: { EDGELIMIT_ADMIN_TOKEN: TOKEN },
  });
  const url = await miniflare.ready;
  const send = (path: string, init: RequestInit = {}) =>
    fetch(new URL(path, url), init).then(async (response) => {
      await response.arrayBuffer();
      return response.status;
    });
  const set = (body: unknown) =>
    send("/__edgelimit/overrides", {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}` },
      body: JSON.stringify(body),
    });
  const calls = async (): Promise<number> => {
    const counted = (await (await fetch(new URL("/__calls", url))).json()) as Record<
      string,
      number
    >;
    return Object.entries(counted)
      .filter(([path]) => path.startsWith("/overrides/read"))
      .reduce((sum, [, count]) => sum + count, 0);
  };

  const scenario = async (name: string, ip: string) => {
    const headers = { "cf-connecting-ip": ip };
    for (let i = 0; i < 20; i++) await send("/api/x", { headers });
    const before = await calls();
    const started = performance.now();
    const times: number[] = [];
    for (let i = 0; i < REQUESTS; i++) {
      const at = performance.now();
      const status = await send("/api/x", { headers });
      times.push(performance.now() - at);
      if (status !== 200) throw new Error(`${name}: answered ${status}`);
    }
    const seconds = (performance.now() - started) / 1000;
    times.sort((a, b) => a - b);
    const reads = (await calls()) - before;
    console.log(
      `${name.padEnd(12)} p50 ${percentile(times, 50).toFixed(2)} ms  p95 ${percentile(times, 95).toFixed(2)} ms  reads of {overrides}: ${reads} in ${seconds.toFixed(1)} s (${REQUESTS} requests)`,
    );
  };

  try {
    await scenario("none", "192.0.2.1");
    for (let i = 0; i < 1000; i += 50) {
      await Promise.all(
        Array.from({ length: 50 }, (_, j) =>
          set({ subject: `ip:10.0.${(i + j) >> 8}.${(i + j) & 255}`, limit: 10 }),
        ),
      );
    }
    await scenario("1,000 held", "192.0.2.2");
    await set({ subject: "ip:192.0.2.3", limit: 999_999 });
    await scenario("own limit", "192.0.2.3");
  } finally {
    await miniflare.dispose();
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
