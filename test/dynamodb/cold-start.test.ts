import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { type AddressInfo, connect, createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLimiter } from "../../src/limiter.js";
import { definePolicy } from "../../src/policy/load.js";
import { DynamoDbStore } from "../../src/stores/dynamodb/store.js";
import { startTlsTerminator, type TlsTerminator } from "../support/tls.js";
import { withinOneWindow } from "../support/windows.js";
import {
  createRateLimitTable,
  type LocalDynamo,
  startDynalite,
  TEST_CREDENTIALS,
} from "./harness.js";

const run = promisify(execFile);
const HANDSHAKE_DELAY_MS = 150;
const POLICY = definePolicy({
  version: 1,
  identity: { ip: { source: "socket" } },
  tiers: { anonymous: { global: 2 } },
});

function listen(server: Server): Promise<number> {
  return new Promise((done) =>
    server.listen(0, "127.0.0.1", () => done((server.address() as AddressInfo).port)),
  );
}

/**
 * A fresh instance's first store call does a TLS handshake; on a 128 MB Lambda (a small share
 * of a core) it takes far longer than the 50 ms budget. Here a proxy in front of a TLS server
 * holds the server's first bytes (its ServerHello) back for 150 ms, so every new connection's
 * handshake takes at least that long, while answers on an open connection are prompt.
 */
describe("a fresh process's first decision against a TLS endpoint", () => {
  let dir: string;
  let dynamo: LocalDynamo;
  const servers: Server[] = [];
  let endpoint: string;
  let caFile: string;
  let terminator: TlsTerminator | undefined;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "edgelimit-tls-"));
    dynamo = await startDynalite();
    await createRateLimitTable(dynamo.client, "rate-limits");
    // dynalite's first item calls in this process compile its code paths, tens of
    // milliseconds on a busy machine: time a real DynamoDB never takes, which would be
    // charged to the decision's 50 ms. Warm them with the same calls on another subject.
    const warm = new DynamoDbStore({
      region: "us-east-1",
      endpoint: dynamo.endpoint,
      credentials: TEST_CREDENTIALS,
    });
    const warmLimiter = createLimiter({ policy: POLICY, store: warm });
    for (let i = 0; i < 3; i++) {
      await warmLimiter.check({ ip: "198.51.100.1", method: "GET", path: "/api" });
    }
    await warm.close();
    terminator = await startTlsTerminator(dir, Number(new URL(dynamo.endpoint).port));
    caFile = terminator.caFile;
    const tlsPort = Number(new URL(terminator.endpoint).port);
    const slowHandshake = createServer((client) => {
      const server = connect(tlsPort, "127.0.0.1");
      client.pipe(server);
      const opened = Date.now();
      server.on("data", (data) => {
        const wait = opened + HANDSHAKE_DELAY_MS - Date.now();
        if (wait <= 0) client.write(data);
        else setTimeout(() => client.write(data), wait);
      });
      server.on("end", () => client.end());
      client.on("error", () => server.destroy());
      server.on("error", () => client.destroy());
    });
    servers.push(slowHandshake);
    endpoint = `https://127.0.0.1:${await listen(slowHandshake)}`;
  });

  afterAll(async () => {
    for (const server of servers) server.close();
    terminator?.close();
    await dynamo?.close();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it("is counted with the default budget, not failed open, though the handshake takes 3x it", async () => {
    const dist = resolve("dist");
    const script = `
      import { createLimiter, definePolicy } from ${JSON.stringify(join(dist, "index.js"))};
      import { DynamoDbStore } from ${JSON.stringify(join(dist, "stores", "dynamodb.js"))};
      const store = new DynamoDbStore({
        region: "us-east-1",
        endpoint: ${JSON.stringify(endpoint)},
        credentials: { accessKeyId: "test", secretAccessKey: "test" },
      });
      const policy = definePolicy({
        version: 1,
        identity: { ip: { source: "socket" } },
        tiers: { anonymous: { global: 2 } },
      });
      const limiter = createLimiter({ policy, store });
      const seen = [];
      for (let i = 0; i < 3; i++) {
        const verdict = await limiter.check({ ip: "203.0.113.9", method: "GET", path: "/api" });
        seen.push({ reason: verdict.reason, remaining: verdict.remaining, ms: Math.round(verdict.durationMs) });
      }
      console.log(JSON.stringify({ budgetMs: policy.budgetMs, seen }));
      await store.close();
    `;
    // `global: 2` a minute on the real clock: the child's start and 3 decisions in one minute.
    await withinOneWindow(60_000, 5_000);
    const { stdout } = await run(process.execPath, ["--input-type=module", "-e", script], {
      env: { ...process.env, NODE_EXTRA_CA_CERTS: caFile },
      timeout: 20_000,
    });
    const { budgetMs, seen } = JSON.parse(stdout) as {
      budgetMs: number;
      seen: { reason: string; remaining: number; ms: number }[];
    };
    expect(budgetMs).toBe(50);
    expect(
      seen.map((decision) => decision.reason),
      JSON.stringify(seen),
    ).toEqual(["within-limit", "within-limit", "over-limit"]);
    expect(seen[0]?.remaining).toBe(1);
    // The first decision really waited for the handshake.
    expect(seen[0]?.ms).toBeGreaterThanOrEqual(HANDSHAKE_DELAY_MS);
  });
});
