/**
 * `edgelimit` and `edgelimit/fetch` (with `edgelimit/dynamodb-fetch`) bundle for edge runtimes
 * with no Node built-ins (SPEC): the built package is bundled by esbuild for
 * `--platform=browser` (which refuses `node:` imports, as Next.js middleware and workerd do)
 * and the bundle runs in workerd through Miniflare.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { bundleForEdge, runInWorkerd } from "../support/edge-bundle.js";
import { withinOneWindow } from "../support/windows.js";

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
    const { packages } = await bundleForEdge(entry, join(dir, "lean"));
    expect(packages).toEqual(["jose"]);
  });

  it("read no module that uses an API the Edge Runtime lacks, even with a JWT configured", async () => {
    // Next.js checks every module of a middleware's graph, used or not: jose's index brings in
    // its JWE deflate, which uses CompressionStream, and \`next build\` warns about it.
    const entry = join(dir, "with-jwt.mjs");
    writeFileSync(
      entry,
      `import { createLimiter, definePolicy, memoryStore } from ${JSON.stringify(join(dist, "index.js"))};
import { withRateLimit } from ${JSON.stringify(join(dist, "adapters", "fetch.js"))};
const limiter = createLimiter({
  policy: definePolicy({
    version: 1,
    identity: {
      ip: { source: "header", header: "x-real-ip" },
      user: { jwt: { algorithms: ["HS256"], secret: { env: "JWT_SECRET" } } },
    },
    tiers: { anonymous: { global: 3 }, authenticated: { global: 30 } },
  }),
  store: memoryStore(),
  env: { JWT_SECRET: "a-secret-of-thirty-two-characters-or-more" },
});
export default { fetch: withRateLimit(() => new Response("ok"), { limiter }) };`,
    );
    const { inputs } = await bundleForEdge(entry, join(dir, "with-jwt"), {
      conditions: ["edge-light"],
    });
    expect(inputs.some((input) => input.includes("node_modules/jose/"))).toBe(true);
    const unsupported = inputs.filter((input) =>
      /\b(?:De)?CompressionStream\s*\(/.test(readFileSync(input, "utf8")),
    );
    expect(unsupported).toEqual([]);
  });

  it("bring no Node built-in into a bundle with the DynamoDB store over fetch", async () => {
    const entry = join(dir, "dynamodb-fetch.mjs");
    writeFileSync(
      entry,
      `export { createLimiter } from ${JSON.stringify(join(dist, "index.js"))};
export { withRateLimit } from ${JSON.stringify(join(dist, "adapters", "fetch.js"))};
export { dynamodbFetchStore } from ${JSON.stringify(join(dist, "stores", "dynamodb-fetch.js"))};`,
    );
    const { nodeBuiltins, inputs, packages } = await bundleForEdge(
      entry,
      join(dir, "dynamodb-fetch"),
    );
    expect(nodeBuiltins).toEqual([]);
    // Not even read: the node:https client and its pool (which load Node's modules at run
    // time, not by import) and the node:crypto signer.
    const nodeOnly =
      /stores\/dynamodb\/(?:client|http-pool|http-answer|pool-agent|store)\.js$|aws\/sigv4\.js$/;
    expect(inputs.filter((input) => nodeOnly.test(input))).toEqual([]);
    expect(packages).toEqual(["jose"]);
  });

  it("bundle for the browser platform and limit requests in workerd", async () => {
    const entry = join(dir, "worker.mjs");
    writeFileSync(entry, WORKER);
    const { outfile, nodeBuiltins } = await bundleForEdge(entry, dir);
    expect(nodeBuiltins).toEqual([]);
    const miniflare = await runInWorkerd(outfile, dir);
    try {
      // `global: 3` counts in minute windows on workerd's real clock: the four in one minute.
      await withinOneWindow(60_000, 5_000);
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
