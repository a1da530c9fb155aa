import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { type AddressInfo, connect, createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type {
  CloudFrontRequest,
  CloudFrontRequestEvent,
} from "../../src/adapters/lambda-edge/events.js";
import { roundTripMs } from "../../src/adapters/lambda-edge/regions.js";
import { buildLambdaEdge } from "../../src/cli/build.js";
import { definePolicy } from "../../src/policy/load.js";
import type { ResolvedPolicy } from "../../src/policy/types.js";
import type { DynamoDbStoreOptions } from "../../src/stores/dynamodb.js";
import {
  createRateLimitTable,
  type LocalDynamo,
  startDynalite,
  TEST_CREDENTIALS,
} from "../dynamodb/harness.js";
import { withinOneWindow } from "../support/windows.js";

const require = createRequire(import.meta.url);
const ADDED_MS = 80;
/**
 * The replica as the function that takes itself to be in-region meets it: 60 ms past its 50 ms
 * budget, so that the budget's timer wins the race on a loaded machine, where timers fire late
 * (with `ADDED_MS` the two were 30 ms apart and the answer won once); and well inside the 140 ms
 * a budget given eu-central-1's distance would allow, so the test still tells the two apart.
 */
const FAR_ADDED_MS = 110;

/** A loopback proxy that holds every answer back by `delayMs`, in order: a distant replica. */
async function distantProxy(target: number, delayMs: number): Promise<Server> {
  const server = createServer((client) => {
    const upstream = connect(target, "127.0.0.1");
    client.pipe(upstream);
    let last = 0;
    upstream.on("data", (data) => {
      const at = Math.max(Date.now() + delayMs, last);
      last = at;
      setTimeout(() => client.write(data), at - Date.now());
    });
    upstream.on("end", () => setTimeout(() => client.end(), Math.max(0, last - Date.now())));
    client.on("error", () => upstream.destroy());
    upstream.on("error", () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return server;
}

function viewerRequest(clientIp: string): CloudFrontRequestEvent {
  return {
    Records: [
      {
        cf: {
          config: { eventType: "viewer-request" },
          request: {
            clientIp,
            method: "GET",
            uri: "/api/items",
            querystring: "",
            headers: { host: [{ key: "Host", value: "d111111abcdef8.cloudfront.net" }] },
          },
        },
      },
    ],
  };
}

/**
 * Lambda@Edge in eu-central-1 writing to a table that has its only replica in us-east-1 (about
 * 90 ms away by the region table): the store's endpoint here answers 80 ms late, as that
 * distance would. The bundle knows the distance from its region table, so the budget is added to
 * it and every decision is counted; a function that took itself to be in-region would take the
 * distance for a failing store and let everything through.
 */
describe("a Lambda@Edge function far from its replica", () => {
  const work = mkdtempSync(join(tmpdir(), "edgelimit-distance-"));
  let dynamo: LocalDynamo;
  let proxy: Server;
  let endpoint: string;
  let farProxy: Server;
  let farEndpoint: string;
  // Open on failure, so that an answer the budget did not wait for shows as no limit at all.
  const policy = definePolicy({
    version: 1,
    defaults: { failMode: "open" },
    tiers: { anonymous: { global: 5 } },
  });

  beforeAll(async () => {
    dynamo = await startDynalite();
    await createRateLimitTable(dynamo.client, "rate-limits");
    proxy = await distantProxy(Number(new URL(dynamo.endpoint).port), ADDED_MS);
    endpoint = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
    farProxy = await distantProxy(Number(new URL(dynamo.endpoint).port), FAR_ADDED_MS);
    farEndpoint = `http://127.0.0.1:${(farProxy.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    proxy?.close();
    farProxy?.close();
    await dynamo?.close();
    rmSync(work, { recursive: true, force: true });
  });

  type Handler = (
    event: CloudFrontRequestEvent,
  ) => Promise<CloudFrontRequest & { status?: string }>;

  /**
   * Builds the function and loads it as Lambda would in `region` (its credentials and
   * `AWS_REGION` set while it loads and runs), runs `use`, then closes its store.
   */
  async function withFunction<T>(
    region: string,
    dir: string,
    settings: { policy: ResolvedPolicy; store: DynamoDbStoreOptions },
    use: (handler: Handler) => Promise<T>,
  ): Promise<T> {
    const [built] = await buildLambdaEdge({ ...settings, outDir: join(work, dir), env: {} });
    const previous = { ...process.env };
    Object.assign(process.env, {
      AWS_REGION: region,
      AWS_ACCESS_KEY_ID: TEST_CREDENTIALS.accessKeyId,
      AWS_SECRET_ACCESS_KEY: TEST_CREDENTIALS.secretAccessKey,
    });
    try {
      const { handler } = require(built?.script as string) as { handler: Handler };
      try {
        return await use(handler);
      } finally {
        await (
          handler as unknown as { limiter: { store: { close(): Promise<void> } } }
        ).limiter.store.close();
      }
    } finally {
      process.env = previous;
    }
  }

  /** A fresh build of the function in `region`, and 8 requests: each one's status or remaining. */
  function requestsFrom(
    region: string,
    clientIp: string,
    settings: { policy: ResolvedPolicy; store: DynamoDbStoreOptions } = {
      policy,
      store: { table: "rate-limits", region: "us-east-1", endpoint },
    },
  ): Promise<string[]> {
    return withFunction(region, `${region}-${clientIp}`, settings, async (handler) => {
      const outcomes: string[] = [];
      for (let i = 0; i < 8; i++) {
        const answer = await handler(viewerRequest(clientIp));
        outcomes.push(answer.status ?? answer.headers["x-ratelimit-remaining"]?.[0]?.value ?? "?");
      }
      return outcomes;
    });
  }

  it("counts exactly when built for that distance", async () => {
    expect(roundTripMs("eu-central-1", "us-east-1")).toBeGreaterThanOrEqual(ADDED_MS);
    // `global: 5` a minute on the real clock: the build (under a second) and 8 requests in one.
    await withinOneWindow(60_000, 5_000);
    expect(await requestsFrom("eu-central-1", "198.51.100.80")).toEqual([
      "4",
      "3",
      "2",
      "1",
      "0",
      "429",
      "429",
      "429",
    ]);
  });

  it("fails open when it takes a far replica for a near one (the distance is what counts)", async () => {
    // In us-east-1 the replica is in-region: its late answers exceed the 50 ms budget.
    const outcomes = await requestsFrom("us-east-1", "198.51.100.81", {
      policy,
      store: { table: "rate-limits", region: "us-east-1", endpoint: farEndpoint },
    });
    expect(outcomes.filter((outcome) => outcome === "429")).toEqual([]);
  });

  it("hybrid counting: reservations in a far lease region are given that distance", async () => {
    // The replica in eu-central-1 is in-region and answers at once; reservations go to
    // us-east-1 (about 90 ms by the region table), whose endpoint answers 80 ms late.
    expect(roundTripMs("eu-central-1", "us-east-1")).toBeGreaterThanOrEqual(ADDED_MS);
    const hybrid = definePolicy({
      version: 1,
      // Open on failure: a local count would give the same numbers and hide a failed reservation.
      tiers: {
        anonymous: { global: { limit: 5, window: "1h", counting: "hybrid", failMode: "open" } },
      },
    });
    const outcomes = await requestsFrom("eu-central-1", "198.51.100.82", {
      policy: hybrid,
      store: {
        table: "rate-limits",
        region: "us-east-1",
        endpoint: dynamo.endpoint,
        globalRegions: ["us-east-1", "eu-central-1"],
        leaseEndpoint: endpoint,
      },
    });
    expect(outcomes).toEqual(["4", "3", "2", "1", "0", "429", "429", "429"]);
  });

  it("hybrid with region holders and allowances: the far function's first request is answered in its region, never over the limit", async () => {
    // The lease region's endpoint answers 300 ms late here: a first request that waited for a
    // reservation there would take that long.
    const slow = await distantProxy(Number(new URL(dynamo.endpoint).port), 300);
    const slowEndpoint = `http://127.0.0.1:${(slow.address() as AddressInfo).port}`;
    // An hour's window: on a busy machine the ten requests may straddle a minute's end, and the
    // next minute would admit its own 5.
    const policy = definePolicy({
      version: 1,
      tiers: { anonymous: { global: { limit: 5, window: "1h", counting: "hybrid" } } },
    });
    try {
      const store: DynamoDbStoreOptions = {
        table: "rate-limits",
        region: "us-east-1",
        endpoint: dynamo.endpoint,
        globalRegions: ["us-east-1", "eu-central-1"],
        leaseEndpoint: slowEndpoint,
        regionHolder: true,
        regionAllowance: true,
        regionEndpoints: { "us-east-1": slowEndpoint, "eu-central-1": dynamo.endpoint },
      };
      await withFunction("eu-central-1", "allowance", { policy, store }, async (handler) => {
        const started = performance.now();
        const first = await handler(viewerRequest("198.51.100.83"));
        const firstMs = performance.now() - started;
        expect(first.status).toBeUndefined();
        expect(firstMs).toBeLessThan(300);
        let admitted = 1;
        for (let i = 0; i < 9; i++) {
          const answer = await handler(viewerRequest("198.51.100.83"));
          if (answer.status === undefined) admitted++;
        }
        expect(admitted).toBeLessThanOrEqual(5);
        expect(admitted).toBeGreaterThanOrEqual(3);
      });
    } finally {
      slow.close();
    }
  });
});
