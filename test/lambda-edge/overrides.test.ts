/**
 * Operators' overrides in the built Lambda@Edge viewer-request bundle (`edgelimit build
 * lambda-edge`, required as Lambda requires it) against dynalite, behind a proxy that counts
 * DynamoDB calls by operation: a cold instance's first request waits for the first read, an
 * override set with the CLI reaches a warm instance within its refresh, and a request pays no
 * store call for them (docs/overrides.md, "Lambda@Edge").
 */
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type {
  CloudFrontRequest,
  CloudFrontRequestEvent,
  CloudFrontResultResponse,
} from "../../src/adapters/lambda-edge/events.js";
import { HANDOVER_HEADER } from "../../src/adapters/lambda-edge/events.js";
import { type BuiltFunction, buildLambdaEdge, run } from "../../src/cli/build.js";
import type { Override } from "../../src/core/overrides.js";
import { loadPolicy } from "../../src/policy/load.js";
import { DynamoDbOverrides } from "../../src/stores/dynamodb/overrides.js";
import {
  type CountingProxy,
  createRateLimitTable,
  type LocalDynamo,
  startCountingProxy,
  startDynalite,
  TEST_CREDENTIALS,
} from "../dynamodb/harness.js";
import { withinOneWindow } from "../support/windows.js";
import { within } from "../support/within.js";

const require = createRequire(import.meta.url);
const POLICY = `
version: 1
identity:
  user:
    trustedHeader: { user: x-user, from: any }
tiers:
  anonymous:
    global: { limit: 3, window: 600s }
  authenticated:
    global: { limit: 3, window: 600s }
overrides: { maxLimit: 1000 }
`;
const work = mkdtempSync(join(tmpdir(), "edgelimit-edge-overrides-"));
const policyFile = join(work, "policy.yaml");
writeFileSync(policyFile, POLICY);
let dynamo: LocalDynamo;
let proxy: CountingProxy;
let tables = 0;
const previousEnv = { ...process.env };
const handlers: Handler[] = [];
/** The bundles' CloudWatch EMF lines (one per decision, written with `console.log`). */
const emf: { reason: string; Blocked?: number; Allowed?: number }[] = [];

type Handler = ((event: CloudFrontRequestEvent) => Promise<Answer>) & {
  limiter: { store: { close(): Promise<void> } };
};
type Answer = CloudFrontRequest & Partial<CloudFrontResultResponse>;

beforeAll(async () => {
  vi.spyOn(console, "log").mockImplementation((line: unknown) => {
    if (typeof line === "string" && line.startsWith('{"_aws"')) emf.push(JSON.parse(line));
  });
  dynamo = await startDynalite();
  proxy = await startCountingProxy(dynamo.endpoint);
  // The bundle signs with the function's credentials, read from the environment as in Lambda.
  Object.assign(process.env, {
    AWS_ACCESS_KEY_ID: TEST_CREDENTIALS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: TEST_CREDENTIALS.secretAccessKey,
  });
});

afterAll(async () => {
  vi.restoreAllMocks();
  for (const handler of handlers) await handler.limiter.store.close();
  process.env = previousEnv;
  await proxy?.close();
  await dynamo?.close();
  rmSync(work, { recursive: true, force: true });
});

async function freshTable(): Promise<string> {
  const table = `edge-overrides-${++tables}`;
  await createRateLimitTable(dynamo.client, table);
  return table;
}

/** The viewer-request function built for `table` (through the counting proxy). */
async function build(
  table: string,
  overrides?: Parameters<typeof buildLambdaEdge>[0]["overrides"],
): Promise<BuiltFunction> {
  const [request] = await buildLambdaEdge({
    policy: loadPolicy(policyFile),
    store: { table, region: "us-east-1", endpoint: proxy.endpoint },
    outDir: join(work, table),
    env: {},
    ...(overrides === undefined ? {} : { overrides }),
  });
  return request as BuiltFunction;
}

/** A cold start: the module loads (its init begins the first read), as Lambda requires it. */
function load(built: BuiltFunction): Handler {
  const { handler } = require(built.script) as { handler: Handler };
  handlers.push(handler);
  return handler;
}

function event(user: string): CloudFrontRequestEvent {
  return {
    Records: [
      {
        cf: {
          config: { eventType: "viewer-request" },
          request: {
            clientIp: "203.0.113.9",
            method: "GET",
            uri: "/api/x",
            querystring: "",
            headers: {
              host: [{ key: "Host", value: "d111111abcdef8.cloudfront.net" }],
              "x-user": [{ key: "X-User", value: user }],
            },
          },
        },
      },
    ],
  };
}

/** "forwarded" with the limit the viewer-response step will send, or the edge's status. */
async function outcome(handler: Handler, user: string): Promise<string> {
  const answer = await handler(event(user));
  if (answer.status !== undefined) return answer.status;
  const handover = answer.headers[HANDOVER_HEADER]?.[0]?.value ?? "{}";
  return `forwarded ${(JSON.parse(handover) as Record<string, string>)["x-ratelimit-limit"]}`;
}

/** The DynamoDB calls `work` made, by operation. */
async function callsOf(work: () => Promise<unknown>): Promise<Record<string, number>> {
  proxy.operations.clear();
  await work();
  return Object.fromEntries(proxy.operations);
}

function limitOf(subject: string, limit: number, extra: Partial<Override> = {}): Override {
  return { subject, scope: "all", effect: "limit", limit, setAt: Date.now(), ...extra };
}

/** `edgelimit override ...` in a child process (asynchronously: dynalite answers from this one). */
function cli(args: string[]): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ["--import", "tsx", "src/cli/main.ts", "override", ...args],
      { encoding: "utf8", env: process.env },
      (error, _stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === "number" ? error.code : -1;
        resolve({ code, stderr });
      },
    );
  });
}

describe("overrides in the Lambda@Edge viewer-request bundle", () => {
  it("builds them into a file of their own, required at init, for a policy with an overrides section", async () => {
    const built = await build(await freshTable());
    expect(built.files).toEqual(["index.js", "jose.js", "peek.js", "overrides.js"]);
    expect(built.overrides).toBe(true);
    // `overrides: false` leaves the file out, and the entry requires none; so does the CLI's
    // `--no-overrides`, and `--overrides` reads them for a policy without the section.
    const without = await build(await freshTable(), false);
    expect(without.files).toEqual(["index.js", "jose.js", "peek.js"]);
    expect(without.overrides).toBe(false);
    const plainPolicy = join(work, "plain.yaml");
    writeFileSync(plainPolicy, POLICY.replace("overrides: { maxLimit: 1000 }", ""));
    const viaCli = async (policy: string, flags: string[]) => {
      const out = join(work, `cli-${flags.join("")}-${policy.length}`);
      const args = ["lambda-edge", "--policy", policy, "--store", "dynamodb://t?region=us-east-1"];
      const code = await run([...args, "--out", out, ...flags]);
      return { code, reads: existsSync(join(out, "viewer-request", "overrides.js")) };
    };
    const write = vi.spyOn(process.stdout, "write").mockImplementation(() => true);
    const complain = vi.spyOn(process.stderr, "write").mockImplementation(() => true);
    try {
      expect(await viaCli(policyFile, ["--no-overrides"])).toEqual({ code: 0, reads: false });
      expect(await viaCli(plainPolicy, [])).toEqual({ code: 0, reads: false });
      expect(await viaCli(plainPolicy, ["--overrides"])).toEqual({ code: 0, reads: true });
      expect(await viaCli(plainPolicy, ["--overrides", "--no-overrides"])).toMatchObject({
        code: 2,
      });
    } finally {
      write.mockRestore();
      complain.mockRestore();
    }
  });

  it("a cold instance's first request waits for the first read: an override set before it applies, for one GetItem and one BatchGetItem", async () => {
    const table = await freshTable();
    const source = new DynamoDbOverrides(dynamo.client, table);
    await source.put({ ...limitOf("user:u_leaked", 0), effect: "block" }, Date.now(), 100);
    await source.put(limitOf("user:u_partner", 1000), Date.now(), 100);
    // A generous first wait: the test machine is busy, and dynalite answers from this process.
    const built = await build(table, { refreshMs: 600_000, firstWaitMs: 10_000 });
    const cold = await callsOf(async () => {
      const handler = load(built);
      expect(await outcome(handler, "u_leaked")).toBe("403");
    });
    // The block refused before counting: the first read was the only work.
    expect(cold).toEqual({ GetItem: 1, BatchGetItem: 1 });
    // And CloudWatch counts it as blocked.
    expect(emf.at(-1)).toMatchObject({ reason: "override-block", Blocked: 1 });
    const handler = handlers.at(-1) as Handler;
    // Then a request pays only its own counting call, overridden or not.
    const plain = await callsOf(async () => {
      for (let i = 0; i < 4; i++) await outcome(handler, `u_plain${i}`);
    });
    const overridden: string[] = [];
    const partner = await callsOf(async () => {
      for (let i = 0; i < 4; i++) overridden.push(await outcome(handler, "u_partner"));
    });
    expect(plain).toEqual({ UpdateItem: 4 });
    expect(partner).toEqual(plain);
    expect(overridden).toEqual(Array(4).fill("forwarded 1000"));
  });

  it("an override set with the CLI raises a user's limit within the refresh, a block refuses within it, and expiry restores the plan's limit", async () => {
    const table = await freshTable();
    const refreshMs = 300;
    const handler = load(await build(table, { refreshMs }));
    // The policy's 600 s window: the 429s at the start and after the raise's expiry in one.
    await withinOneWindow(600_000, 12_000);
    const seen: string[] = [];
    for (let i = 0; i < 4; i++) seen.push(await outcome(handler, "u_raise"));
    expect(seen).toEqual(["forwarded 3", "forwarded 3", "forwarded 3", "429"]);
    const url = `dynamodb://${table}?region=us-east-1&endpoint=${dynamo.endpoint}`;
    const set = await cli([
      ...["set", "user:u_raise", "--limit", "1000", "--note", "contract 42"],
      ...["--store", url, "--policy", policyFile],
    ]);
    expect(set.stderr).toBe("");
    expect(set.code).toBe(0);
    // Polled every 50 ms: the refresh starts at the first request that finds it 300 ms old.
    const raised = await within(
      async () => (await outcome(handler, "u_raise")) === "forwarded 1000",
      "the raised limit",
      15_000,
      50,
    );
    expect(raised).toBeLessThan(refreshMs + 5_000); // room for a busy machine
    // Another operator's block (through the library on the same table).
    const source = new DynamoDbOverrides(dynamo.client, table);
    await source.put({ ...limitOf("user:u_raise", 0), effect: "block" }, Date.now(), 100);
    await within(
      async () => (await outcome(handler, "u_raise")) === "403",
      "the block",
      15_000,
      50,
    );
    // A raise that ends: once past its `until`, by the instance's clock, the plan's limit is back.
    const until = Date.now() + 4_000;
    await source.put(limitOf("user:u_raise", 1000, { until }), Date.now(), 100);
    await within(
      async () => (await outcome(handler, "u_raise")) === "forwarded 1000",
      "the expiring raise",
      until - Date.now(),
      50,
    );
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, until - Date.now() + 10)));
    expect(await outcome(handler, "u_raise")).toBe("429");
  }, 30_000);

  it("refreshes on requests: one GetItem of the version per refresh at most, and a BatchGetItem only when it moved", async () => {
    const table = await freshTable();
    const refreshMs = 200;
    const handler = load(await build(table, { refreshMs }));
    await outcome(handler, "u_warm"); // the first read, then its count
    const spaced = async (user: string, count: number) => {
      for (let i = 0; i < count; i++) {
        await outcome(handler, `${user}${i}`);
        await new Promise((resolve) => setTimeout(resolve, 40));
      }
    };
    let started = Date.now();
    const quiet = await callsOf(() => spaced("u_quiet", 25));
    let elapsed = Date.now() - started;
    expect(quiet.UpdateItem).toBe(25);
    expect(quiet.BatchGetItem).toBeUndefined();
    expect(quiet.GetItem).toBeGreaterThanOrEqual(1);
    expect(quiet.GetItem).toBeLessThanOrEqual(Math.floor(elapsed / refreshMs) + 1);
    const source = new DynamoDbOverrides(dynamo.client, table);
    await source.put(limitOf("user:u_moved", 50), Date.now(), 100);
    started = Date.now();
    const moved = await callsOf(() => spaced("u_moved", 25));
    elapsed = Date.now() - started;
    expect(moved.UpdateItem).toBe(25);
    expect(moved.BatchGetItem).toBe(1);
    expect(moved.GetItem).toBeLessThanOrEqual(Math.floor(elapsed / refreshMs) + 1);
  });
});
