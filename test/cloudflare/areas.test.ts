import { join } from "node:path";
import { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parsePolicy } from "../../src/policy/load.js";
import { buildWorker, ORIGIN, scratch, withinOneWindow } from "./harness.js";

/** How far the rule objects (the lease area, enam) are from the other areas, each way. */
const LEASE_DELAY_MS = 300;
const LIMIT = 40;

const POLICY = `
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
    window: 60s
    backend: exact
    counting: hybrid
`;

/** Three isolates, one per area, as Cloudflare would run them in three data centers. */
const AREAS = { na: "NA", eu: "EU", as: "AS" } as const;
type Isolate = keyof typeof AREAS;

/**
 * Areas on Workers (src/adapters/cloudflare/areas.ts), in workerd: three Workers (isolates) in
 * North America (the lease area), Europe and Asia share the counter objects; the rule objects
 * answer 300 ms late, as they would far from Europe and Asia.
 */
describe("areas: hybrid counting near each area, in workerd", () => {
  let miniflare: Miniflare;
  let cleanup: () => Promise<void> = async () => {};

  beforeAll(async () => {
    const folder = await scratch();
    cleanup = folder.cleanup;
    const script = await buildWorker(
      folder.dir,
      parsePolicy(POLICY, "areas.yaml"),
      "test/cloudflare/fixtures/areas-worker.ts",
    );
    const worker = (name: Isolate) => ({
      name,
      modules: true,
      scriptPath: script,
      modulesRoot: folder.dir,
      compatibilityDate: "2025-06-01",
      bindings: { LEASE_DELAY_MS: String(LEASE_DELAY_MS) },
      durableObjects: {
        EDGELIMIT_COUNTER:
          name === "na"
            ? { className: "DistantCounter", useSQLite: true }
            : { className: "DistantCounter", scriptName: "na", useSQLite: true },
      },
    });
    miniflare = new Miniflare({
      workers: [worker("na"), worker("eu"), worker("as")],
      durableObjectsPersist: join(folder.dir, "objects"),
    });
    await miniflare.ready;
  }, 60_000);

  afterAll(async () => {
    await miniflare?.dispose();
    await cleanup();
  });

  async function send(isolate: Isolate, ip: string): Promise<{ status: number; ms: number }> {
    const worker = await miniflare.getWorker(isolate);
    const started = performance.now();
    const response = await worker.fetch(`${ORIGIN}/api/items`, {
      headers: { "cf-connecting-ip": ip },
      cf: { continent: AREAS[isolate] },
    });
    await response.arrayBuffer();
    return { status: response.status, ms: performance.now() - started };
  }

  async function calls(name: string): Promise<{ rule: number; area: number }> {
    const worker = await miniflare.getWorker("na");
    const response = await worker.fetch(`${ORIGIN}/__calls?name=${encodeURIComponent(name)}`);
    return (await response.json()) as { rule: number; area: number };
  }

  it("answers a subject's first request in a far area there, and the next ones from its units", async () => {
    // Each isolate's area is its first request's: placed before the timed one.
    await send("eu", "198.51.100.250");
    await withinOneWindow(60_000, 15_000);
    const ip = "198.51.100.1";
    const first = await send("eu", ip);
    expect(first.status).toBe(200);
    // The allowance: no wait for the lease area.
    expect(first.ms).toBeLessThan(LEASE_DELAY_MS);
    // Then ten a second, far beyond the limit's pace (40 a minute): the area object's holder,
    // filled from the rule object behind the answers, answers nearly all of them.
    const next: number[] = [];
    for (let i = 0; i < 20; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      const answer = await send("eu", ip);
      expect(answer.status).toBe(200);
      next.push(answer.ms);
    }
    // A request that finds the holder empty waits for the fill in flight, or for the lease area;
    // how many do depends on the machine's load, but the typical one waits for neither.
    next.sort((a, b) => a - b);
    expect(next[Math.floor(next.length / 2)]).toBeLessThan(LEASE_DELAY_MS / 10);
    expect(next.filter((ms) => ms >= LEASE_DELAY_MS).length).toBeLessThanOrEqual(5);
    // Exact counting would have called the rule object 21 times, each a lease round trip. The
    // area object calls it for its top-ups and for each request that found its holder empty,
    // which a loaded machine makes more of (as it does the waits above): at most two-thirds.
    const rule = await calls(`ip:${ip}|api|api`);
    expect(rule.rule).toBeGreaterThan(0);
    expect(rule.rule).toBeLessThanOrEqual(14);
  }, 60_000);

  it("admits a spread attack over three areas up to the limit and no more", async () => {
    for (const isolate of ["na", "eu", "as"] as const) await send(isolate, "198.51.100.251");
    await withinOneWindow(60_000, 20_000);
    const ip = "198.51.100.2";
    const burst = await Promise.all(
      (["na", "eu", "as"] as const).flatMap((isolate) =>
        Array.from({ length: 40 }, () => send(isolate, ip)),
      ),
    );
    let admitted = burst.filter((answer) => answer.status === 200).length;
    expect(admitted).toBeLessThanOrEqual(LIMIT);
    // Then one request at a time, round the areas: what the allowances and the areas' holders
    // still hold is spent, and units held back for allowances no area spent come back.
    for (let round = 0; round < 30 && admitted < LIMIT; round++) {
      for (const isolate of ["na", "eu", "as"] as const) {
        if ((await send(isolate, ip)).status === 200) admitted++;
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(admitted).toBe(LIMIT);
    // The limit reached, the objects still finish what they started behind their answers
    // (revocations, refunds: rule-object round trips each); a request queued behind them could
    // pass the store's 1 s call timeout on a loaded machine and be failed closed (503) instead
    // of refused. Once they are done, every area refuses.
    await new Promise((resolve) => setTimeout(resolve, 4 * LEASE_DELAY_MS));
    for (const isolate of ["na", "eu", "as"] as const) {
      expect((await send(isolate, ip)).status).toBe(429);
    }
  }, 60_000);
});
