/**
 * A Worker isolate far from its rule objects, in workerd (Miniflare): the legitimate decisions'
 * latency with exact counting, hybrid counting in each isolate, and hybrid counting through the
 * areas' objects (`areas`, src/adapters/cloudflare/areas.ts). Miniflare runs every object on this
 * machine, so the rule objects are made far: they answer `AREAS_BENCH_DELAY_MS` late (default
 * 200 ms, about what ap-southeast-1 pays us-east-1 in docs/accuracy.md). An isolate in Europe
 * serves `SUBJECTS` subjects, each sending a request every 300 to 500 ms (well under the limit
 * of 100 per 10 s window) for `AREAS_BENCH_SECONDS` (default 20), from a window's start, once
 * each subject's objects exist; meanwhile one address attacks from isolates in North America
 * (the lease area), Europe and Asia at once, and its admitted requests are counted against the
 * limit of the windows the run covers.
 *
 *   npx tsx bench/worker-areas.bench.ts   (AREAS_BENCH_ATTACK_LOOPS=0: without the attacker)
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Miniflare } from "miniflare";
import { buildCloudflareWorker } from "../scripts/build-cloudflare.js";
import { parsePolicy } from "../src/policy/load.js";

const DELAY_MS = Number(process.env.AREAS_BENCH_DELAY_MS ?? 200);
const SECONDS = Number(process.env.AREAS_BENCH_SECONDS ?? 20);
const SUBJECTS = 40;
const WINDOW_MS = 10_000;
const LIMIT = 100;
/** The attacker's requests in flight in each of the three isolates (0: no attacker). */
const ATTACK_LOOPS = Number(process.env.AREAS_BENCH_ATTACK_LOOPS ?? 2);
const ORIGIN = "https://example.test";

const policy = (counting: "exact" | "hybrid") => `
version: 1
budget: 3s
defaults: { failMode: closed }
identity:
  ip: { source: header, header: cf-connecting-ip }
namespaces:
  api:
    match: { path: /api/ }
    key: ip
    limit: ${LIMIT}
    window: 10s
    backend: exact
    counting: ${counting}
`;

interface Mode {
  readonly name: string;
  readonly counting: "exact" | "hybrid";
  readonly areas: boolean;
  /** The rule objects beside the isolate: what exact counting costs where they live. */
  readonly near?: boolean;
}

const MODES: Mode[] = [
  { name: "exact, rule objects near", counting: "exact", areas: false, near: true },
  { name: "exact", counting: "exact", areas: false },
  { name: "hybrid, each isolate", counting: "hybrid", areas: false },
  { name: "hybrid + areas", counting: "hybrid", areas: true },
];

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
}

async function run(dir: string, mode: Mode): Promise<string> {
  const script = join(dir, `${mode.counting}.js`);
  await buildCloudflareWorker({
    policy: parsePolicy(policy(mode.counting)),
    entry: "test/cloudflare/fixtures/areas-worker.ts",
    outfile: script,
  });
  const worker = (name: string) => ({
    name,
    modules: true,
    scriptPath: script,
    modulesRoot: dir,
    compatibilityDate: "2025-06-01",
    bindings: {
      LEASE_DELAY_MS: String(mode.near === true ? 0 : DELAY_MS),
      AREAS: mode.areas ? "on" : "off",
    },
    durableObjects: {
      EDGELIMIT_COUNTER:
        name === "na"
          ? { className: "DistantCounter" }
          : { className: "DistantCounter", scriptName: "na" },
    },
  });
  const miniflare = new Miniflare({ workers: [worker("na"), worker("eu"), worker("as")] });
  await miniflare.ready;
  const isolates = {
    NA: await miniflare.getWorker("na"),
    EU: await miniflare.getWorker("eu"),
    AS: await miniflare.getWorker("as"),
  };
  const send = async (ip: string, continent: keyof typeof isolates = "EU") => {
    const started = performance.now();
    const response = await isolates[continent].fetch(`${ORIGIN}/api/items`, {
      headers: { "cf-connecting-ip": ip },
      cf: { continent },
    });
    await response.arrayBuffer();
    return { status: response.status, ms: performance.now() - started };
  };
  // Every subject's objects exist, as in a Worker that has been serving them (a new object's
  // first call in Miniflare, 40 at once on this machine, takes some 100 ms more); measured from
  // the next window's start.
  await Promise.all(Array.from({ length: SUBJECTS }, (_, i) => send(`198.51.100.${i + 1}`)));
  await new Promise((resolve) => setTimeout(resolve, WINDOW_MS - (Date.now() % WINDOW_MS)));
  const times: number[] = [];
  let refused = 0;
  const until = performance.now() + SECONDS * 1000;
  // The attacker: one address from all three areas at once, ATTACK_LOOPS requests in flight in
  // each, until a second before the last window ends (its requests are all counted in the
  // run's windows, whichever isolate answered them).
  let attackAdmitted = 0;
  const attackUntil = until - 1000;
  const attack = Array.from({ length: 3 * ATTACK_LOOPS }, async (_, i) => {
    const continent = (["NA", "EU", "AS"] as const)[i % 3] as keyof typeof isolates;
    while (performance.now() < attackUntil) {
      if ((await send("203.0.113.66", continent)).status === 200) attackAdmitted++;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  });
  await Promise.all([
    ...attack,
    ...Array.from({ length: SUBJECTS }, async (_, i) => {
      const ip = `198.51.100.${i + 1}`;
      while (performance.now() < until) {
        await new Promise((resolve) => setTimeout(resolve, 300 + Math.random() * 200));
        const answer = await send(ip);
        times.push(answer.ms);
        if (answer.status !== 200) refused++;
      }
    }),
  ]);
  await miniflare.dispose();
  times.sort((a, b) => a - b);
  const waited = times.filter((ms) => ms >= DELAY_MS).length;
  const windows = Math.ceil((SECONDS * 1000) / WINDOW_MS);
  return `| ${mode.name} | ${times.length} | ${refused} | ${percentile(times, 50).toFixed(1)} | ${percentile(times, 99).toFixed(1)} | ${((100 * waited) / times.length).toFixed(1)}% | ${attackAdmitted} of ${windows * LIMIT} |`;
}

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), "edgelimit-areas-bench-"));
  try {
    console.log(
      `An isolate in Europe, rule objects ${DELAY_MS} ms away, ${SUBJECTS} subjects, ${SECONDS} s:`,
    );
    console.log(
      "| mode | legitimate decisions | refused | p50 ms | p99 ms | a rule object's round trip or more | attacker admitted |",
    );
    console.log("|---|---:|---:|---:|---:|---:|---:|");
    for (const mode of MODES) console.log(await run(dir, mode));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
