/**
 * `edgelimit` and `edgelimit/fetch` bundle for edge runtimes with no Node built-ins (SPEC): the
 * built package is bundled by esbuild for `--platform=browser` (which refuses `node:` imports,
 * as Next.js middleware and workerd do) and the bundle runs in workerd through Miniflare.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { build } from "esbuild";
import { Miniflare } from "miniflare";
import { afterAll, describe, expect, it } from "vitest";

const dir = mkdtempSync(join(tmpdir(), "edgelimit-edge-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const dist = resolve("dist");
const WORKER = `
import { createLimiter, definePolicy, memoryStore } from ${JSON.stringify(join(dist, "index.js"))};
import { withRateLimit } from ${JSON.stringify(join(dist, "adapters", "fetch.js"))};

const limiter = createLimiter({
  policy: definePolicy({
    version: 1,
    identity: { ip: { source: "header", header: "cf-connecting-ip" } },
    tiers: { anonymous: { global: 3, paths: { "/api/export": 1 } } },
  }),
  store: memoryStore(),
});

export default {
  fetch: withRateLimit(() => new Response("from the origin"), {
    limiter,
    ip: (request) => request.headers.get("cf-connecting-ip") ?? undefined,
  }),
};
`;

describe("the edge entry points", () => {
  it("leave the policy parser out of a bundle that takes a resolved policy", async () => {
    // package.json says "sideEffects": false, so a bundler drops the modules nothing uses:
    // without definePolicy, neither zod nor yaml (about 490 KB minified) is bundled.
    const entry = join(dir, "lean.mjs");
    writeFileSync(
      entry,
      `export { createLimiter, memoryStore } from ${JSON.stringify(join(dist, "index.js"))};
export { withRateLimit } from ${JSON.stringify(join(dist, "adapters", "fetch.js"))};`,
    );
    const result = await build({
      entryPoints: [entry],
      bundle: true,
      platform: "browser",
      format: "esm",
      minify: true,
      write: false,
      logLevel: "silent",
      metafile: true,
    });
    // What went into the output (the metafile's inputs list every file read, used or not).
    const [output] = Object.values(result.metafile.outputs);
    const packages = Object.entries(output?.inputs ?? {})
      .filter(([input, used]) => input.includes("node_modules/") && used.bytesInOutput > 0)
      .map(([input]) => input.split("node_modules/")[1]?.split("/")[0]);
    expect([...new Set(packages)]).toEqual(["jose"]);
  });

  it("bundle for the browser platform and limit requests in workerd", async () => {
    const entry = join(dir, "worker.mjs");
    writeFileSync(entry, WORKER);
    const outfile = join(dir, "bundle.mjs");
    const result = await build({
      entryPoints: [entry],
      bundle: true,
      platform: "browser",
      format: "esm",
      minify: true,
      outfile,
      logLevel: "silent",
      metafile: true,
    });
    const inputs = Object.keys(result.metafile.inputs);
    expect(inputs.filter((input) => input.startsWith("node:"))).toEqual([]);

    const miniflare = new Miniflare({
      modules: true,
      scriptPath: outfile,
      // Module names are relative to this root: the bundle's own folder.
      modulesRoot: dir,
      compatibilityDate: "2025-06-01",
    });
    try {
      const statuses: number[] = [];
      let last: Response | undefined;
      for (let i = 0; i < 4; i++) {
        const response = await miniflare.dispatchFetch("https://example.test/api/items", {
          headers: { "cf-connecting-ip": "198.51.100.4" },
        });
        await response.text();
        statuses.push(response.status);
        last = response as unknown as Response;
      }
      expect(statuses).toEqual([200, 200, 200, 429]);
      expect(last?.headers.get("retry-after")).toMatch(/^\d+$/);
      // Another client is counted apart; a per-path rule applies on its path.
      const other = await miniflare.dispatchFetch("https://example.test/api/export", {
        headers: { "cf-connecting-ip": "198.51.100.5" },
      });
      expect(other.status).toBe(200);
      expect(other.headers.get("x-ratelimit-remaining")).toBe("0");
      expect(await other.text()).toBe("from the origin");
    } finally {
      await miniflare.dispose();
    }
  });
});
