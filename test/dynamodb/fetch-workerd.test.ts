/**
 * `edgelimit/dynamodb-fetch` as the edge runs it: the built package bundled for the browser
 * platform (no Node built-in, no npm package) and run in workerd through Miniflare against
 * dynalite on loopback. Two workerd runtimes and a Node process with `edgelimit/dynamodb` count
 * in one table, as a Worker, a Next.js middleware and a Lambda@Edge function of one site would.
 */
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLimiter } from "../../src/limiter.js";
import { definePolicy } from "../../src/policy/load.js";
import { DynamoDbStore } from "../../src/stores/dynamodb.js";
import { bundleForEdge, runInWorkerd } from "../support/edge-bundle.js";
import {
  createRateLimitTable,
  type LocalDynamo,
  scanTable,
  startDynalite,
  TEST_CREDENTIALS,
} from "./harness.js";

const dir = mkdtempSync(join(tmpdir(), "edgelimit-dynamodb-workerd-"));
const dist = resolve("dist");
const TABLE = "edge-rate-limits";

/** The policy both editions run: 4 a day per client, 1 a day on /api/export. */
const POLICY = {
  version: 1,
  budget: "2s",
  identity: { ip: { source: "header", header: "cf-connecting-ip" } },
  tiers: {
    anonymous: {
      global: { limit: 4, window: "1d" },
      paths: { "/api/export": { limit: 1, window: "1d" } },
    },
  },
} as const;

const WORKER = `
import { createLimiter, definePolicy } from ${JSON.stringify(join(dist, "index.js"))};
import { withRateLimit } from ${JSON.stringify(join(dist, "adapters", "fetch.js"))};
import { dynamodbFetchStore } from ${JSON.stringify(join(dist, "stores", "dynamodb-fetch.js"))};

let store;
let handler;
export default {
  fetch(request, env) {
    // Bindings arrive with the first request: build the limiter then, once per isolate.
    store ??= dynamodbFetchStore({
      region: "us-east-1",
      table: env.TABLE,
      endpoint: env.DYNAMODB_ENDPOINT,
      credentials: { accessKeyId: env.AWS_ACCESS_KEY_ID, secretAccessKey: env.AWS_SECRET_ACCESS_KEY },
    });
    handler ??= withRateLimit(() => new Response("from the origin"), {
      limiter: createLimiter({ policy: definePolicy(${JSON.stringify(POLICY)}), store }),
    });
    if (new URL(request.url).pathname === "/store") {
      return Response.json({ name: store.name, requestScopedIo: store.traits.requestScopedIo, overrides: store.overrides !== undefined, status: store.status() });
    }
    return handler(request, env);
  },
};
`;

let dynamo: LocalDynamo;
let outfile: string;
let nodeBuiltins: string[];
let packages: string[];
let storeBytes: number;
const runtimes: Miniflare[] = [];
let nodeStore: DynamoDbStore;

beforeAll(async () => {
  dynamo = await startDynalite();
  await createRateLimitTable(dynamo.client, TABLE);
  writeFileSync(join(dir, "worker.mjs"), WORKER);
  ({ outfile } = await bundleForEdge(join(dir, "worker.mjs"), dir));
  // The store's own weight: what the entry point brings into a bundle.
  const alone = join(dir, "store-alone");
  writeFileSync(
    join(dir, "store-alone.mjs"),
    `export { dynamodbFetchStore } from ${JSON.stringify(join(dist, "stores", "dynamodb-fetch.js"))};`,
  );
  let aloneFile: string;
  ({
    nodeBuiltins,
    packages,
    outfile: aloneFile,
  } = await bundleForEdge(join(dir, "store-alone.mjs"), alone));
  storeBytes = statSync(aloneFile).size;
  const bindings = {
    TABLE,
    DYNAMODB_ENDPOINT: dynamo.endpoint,
    AWS_ACCESS_KEY_ID: TEST_CREDENTIALS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: TEST_CREDENTIALS.secretAccessKey,
  };
  for (let i = 0; i < 2; i++) runtimes.push(await runInWorkerd(outfile, dir, bindings));
  nodeStore = new DynamoDbStore({
    table: TABLE,
    region: "us-east-1",
    endpoint: dynamo.endpoint,
    credentials: TEST_CREDENTIALS,
  });
}, 60_000);

afterAll(async () => {
  await Promise.all(runtimes.map((runtime) => runtime.dispose()));
  await nodeStore?.close();
  await dynamo?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** One request through workerd runtime `i`: its status and remaining count. */
async function inWorkerd(i: number, ip: string, path = "/api/items") {
  const response = await (runtimes[i] as Miniflare).dispatchFetch(`https://example.test${path}`, {
    headers: { "cf-connecting-ip": ip },
  });
  await response.text();
  return { status: response.status, remaining: response.headers.get("x-ratelimit-remaining") };
}

describe("edgelimit/dynamodb-fetch in workerd", () => {
  it("bundles for the browser platform with no Node built-in and no npm package", () => {
    expect(nodeBuiltins).toEqual([]);
    expect(packages).toEqual([]);
    // The store alone, minified: 34 KiB since the lease items' part in region allowances and
    // the region holder's full mark (the allowances themselves are the Node store's,
    // region-allowance.ts, not in this bundle).
    expect(storeBytes).toBeLessThan(34 * 1024);
  });

  it("knows it runs on workerd, where a call belongs to the request that made it (and keeps overrides, which its requests refresh)", async () => {
    const response = await (runtimes[0] as Miniflare).dispatchFetch("https://example.test/store");
    expect(await response.json()).toMatchObject({
      name: "dynamodb-fetch",
      requestScopedIo: true,
      overrides: true,
      status: { state: "ok" },
    });
  });

  it("counts across two workerd runtimes and a Node process on one table: 4 of 9 admitted", async () => {
    const limiter = createLimiter({ policy: definePolicy(POLICY), store: nodeStore });
    const statuses: number[] = [];
    for (let i = 0; i < 9; i++) {
      if (i % 3 === 2) {
        const verdict = await limiter.check({
          ip: "203.0.113.60",
          path: "/api/items",
          headers: { "cf-connecting-ip": "203.0.113.60" },
        });
        statuses.push(verdict.status);
      } else statuses.push((await inWorkerd(i % 3, "203.0.113.60")).status);
    }
    expect(statuses).toEqual([200, 200, 200, 200, 429, 429, 429, 429, 429]);
    // Another client has a counter of its own.
    expect(await inWorkerd(1, "203.0.113.61")).toEqual({ status: 200, remaining: "3" });
  });

  it("gives back a refused request's share of the global rule from workerd", async () => {
    const ip = "203.0.113.62";
    expect((await inWorkerd(0, ip, "/api/export")).status).toBe(200);
    // Refused by the path rule: the global rule's increment is given back.
    expect((await inWorkerd(1, ip, "/api/export")).status).toBe(429);
    let counts: Record<string, number> | undefined;
    for (let attempt = 0; attempt < 50; attempt++) {
      const items = await scanTable(dynamo.client, TABLE);
      counts = items.find((item) => item.PK === `ip:${ip}`)?.counts;
      if (counts?.["anonymous|global"] === 1) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(counts).toEqual({ "anonymous|global": 1, "anonymous|/api/export": 2 });
    expect(await inWorkerd(0, ip)).toEqual({ status: 200, remaining: "2" });
  });
});
