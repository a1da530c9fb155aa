/**
 * Operators' overrides in DynamoDB over `fetch` from a Worker: the built package bundled for the
 * browser platform and run in workerd (Miniflare) against dynalite behind a proxy that counts
 * calls by operation. workerd runs nothing between requests, so the limiter's requests refresh
 * its copy (core/override-watch.ts), and the Worker hands each read to the request's
 * `waitUntil` through `withRateLimit`. Overrides are set from Node (the CLI and the library);
 * each must apply in the Worker within its refresh (`REFRESH_MS`, short here) plus a round
 * trip, and a request must make no call of its own for them.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLimiter, type Limiter } from "../../src/limiter.js";
import { definePolicy } from "../../src/policy/load.js";
import { DynamoDbStore } from "../../src/stores/dynamodb.js";
import { bundleForEdge, runInWorkerd } from "../support/edge-bundle.js";
import { overrideCli, workerOverrideCases } from "../support/worker-overrides.js";
import {
  type CountingProxy,
  createRateLimitTable,
  type LocalDynamo,
  startCountingProxy,
  startDynalite,
  TEST_CREDENTIALS,
} from "./harness.js";

const dir = mkdtempSync(join(tmpdir(), "edgelimit-dynamodb-overrides-workerd-"));
const policyFile = join(dir, "policy.json");
const dist = resolve("dist");
const TABLE = "edge-overrides";
const REFRESH_MS = 200;
/** The refresh, a round trip, and a busy machine's lag. */
const BOUND_MS = 5_000;

// An hour's window: no test waits for a new one, and each uses addresses of its own.
const POLICY = {
  version: 1,
  budget: "2s",
  identity: { ip: { source: "header", header: "cf-connecting-ip" } },
  tiers: { anonymous: { global: { limit: 3, window: "1h" } } },
  overrides: { maxLimit: 100 },
} as const;

/** Bindings arrive with the first request: the store and limiter are built then, once per isolate. */
const WORKER = `
import { createLimiter, definePolicy } from ${JSON.stringify(join(dist, "index.js"))};
import { withRateLimit } from ${JSON.stringify(join(dist, "adapters", "fetch.js"))};
import { dynamodbFetchStore } from ${JSON.stringify(join(dist, "stores", "dynamodb-fetch.js"))};

let handler;
export default {
  fetch(request, env, ctx) {
    handler ??= withRateLimit(() => new Response("from the origin"), {
      limiter: createLimiter({
        policy: definePolicy(${JSON.stringify(POLICY)}),
        store: dynamodbFetchStore({
          region: "us-east-1",
          table: env.TABLE,
          endpoint: env.DYNAMODB_ENDPOINT,
          credentials: { accessKeyId: env.AWS_ACCESS_KEY_ID, secretAccessKey: env.AWS_SECRET_ACCESS_KEY },
        }),
        overrides: { refreshMs: ${REFRESH_MS} },
      }),
    });
    return handler(request, env, ctx);
  },
};
`;

let dynamo: LocalDynamo;
let proxy: CountingProxy;
let outfile: string;
let operator: Limiter;
/** The isolate of the first test, fresh then; the later ones reuse it (a start takes ~1.5 s). */
let runtime: Miniflare | undefined;

beforeAll(async () => {
  dynamo = await startDynalite();
  await createRateLimitTable(dynamo.client, TABLE);
  proxy = await startCountingProxy(dynamo.endpoint);
  writeFileSync(join(dir, "worker.mjs"), WORKER);
  writeFileSync(policyFile, JSON.stringify(POLICY));
  ({ outfile } = await bundleForEdge(join(dir, "worker.mjs"), dir));
  // An operator's limiter in Node on the same table (it reads its own copy once an hour).
  operator = createLimiter({
    policy: definePolicy(POLICY),
    store: new DynamoDbStore({
      table: TABLE,
      region: "us-east-1",
      endpoint: dynamo.endpoint,
      credentials: TEST_CREDENTIALS,
    }),
    overrides: { refreshMs: 3_600_000 },
  });
}, 60_000);

afterAll(async () => {
  operator?.close();
  await (operator?.store as DynamoDbStore | undefined)?.close();
  await runtime?.dispose();
  await proxy?.close();
  await dynamo?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The isolate (fresh at its first use), reaching dynalite through the counting proxy. */
async function isolate(): Promise<Miniflare> {
  runtime ??= await runInWorkerd(outfile, dir, {
    TABLE,
    DYNAMODB_ENDPOINT: proxy.endpoint,
    AWS_ACCESS_KEY_ID: TEST_CREDENTIALS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: TEST_CREDENTIALS.secretAccessKey,
  });
  return runtime;
}

async function send(ip: string) {
  const response = await (await isolate()).dispatchFetch("https://example.test/api/items", {
    headers: { "cf-connecting-ip": ip },
  });
  await response.text();
  return { status: response.status, limit: response.headers.get("x-ratelimit-limit") };
}

/** `edgelimit override …` in a child process (asynchronously: dynalite answers from this one). */
function cli(args: string[]) {
  return overrideCli(
    `dynamodb://${TABLE}?region=us-east-1&endpoint=${dynamo.endpoint}`,
    policyFile,
    {
      AWS_ACCESS_KEY_ID: TEST_CREDENTIALS.accessKeyId,
      AWS_SECRET_ACCESS_KEY: TEST_CREDENTIALS.secretAccessKey,
    },
  )(args);
}

describe("overrides of DynamoDB over fetch in a Worker", () => {
  workerOverrideCases({ operator: () => operator, isolate, send, cli, boundMs: BOUND_MS });

  it("a request makes no call for the overrides: at most one version read per refresh per isolate", async () => {
    await send("198.51.100.30"); // warm
    proxy.operations.clear();
    const started = Date.now();
    const requests = 16;
    for (let i = 0; i < requests; i++) {
      expect((await send(`198.51.100.${31 + (i % 8)}`)).status).toBeLessThan(500);
      await new Promise((resolve) => setTimeout(resolve, 30));
    }
    const elapsed = Date.now() - started;
    const calls = Object.fromEntries(proxy.operations);
    // One counting call per request, and the version reads beside them.
    expect(calls.UpdateItem).toBe(requests);
    expect(calls.GetItem).toBeGreaterThanOrEqual(1);
    expect(calls.GetItem).toBeLessThanOrEqual(Math.floor(elapsed / REFRESH_MS) + 1);
    expect(calls.GetItem).toBeLessThan(requests / 2);
    // Nothing changed meanwhile: the shards were not read again, and nothing else was called.
    expect(Object.keys(calls).sort()).toEqual(["GetItem", "UpdateItem"]);
  });
});
