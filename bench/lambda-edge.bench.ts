/**
 * Lambda@Edge bundle size and cold start: edgelimit's viewer-request bundle (built by
 * `edgelimit build lambda-edge`) against a seed-style bundle of the same job written with the
 * full AWS SDK v3 (`@aws-sdk/client-dynamodb` + `@aws-sdk/lib-dynamodb`), both minified by
 * esbuild. Cold start = a fresh node process: module load, then the first invocation against a
 * dynalite server on loopback. Run: npx tsx bench/lambda-edge.bench.ts [runs] [before-tree]
 *
 * `before-tree` is another checkout of this repository (for example `git archive HEAD` unpacked
 * in a temporary directory, with node_modules linked): its `edgelimit build` builds a second
 * viewer-request bundle for the same dynalite, measured in the same rounds. Every round runs
 * each variant once, in turn, so a burst of load from other jobs falls on all of them.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { deflateRawSync } from "node:zlib";
import * as esbuild from "esbuild";
import { buildLambdaEdge } from "../src/cli/build.js";
import { loadPolicy } from "../src/policy/load.js";
import { createRateLimitTable, startDynalite, TEST_CREDENTIALS } from "../test/dynamodb/harness.js";

const runs = Number(process.argv[2] ?? 9);
const beforeTree = process.argv[3];
const work = mkdtempSync(join(tmpdir(), "edgelimit-bench-"));
const credentials = TEST_CREDENTIALS;

const local = await startDynalite();
const endpoint = local.endpoint;

try {
  await createRateLimitTable(local.client, "rate-limits");

  // The seed policy's 50 ms budget would turn a cold start slowed by other jobs on this machine
  // into a fail-open answer at 50 ms (and a failed probe): measured here is the time to the
  // real answer, so the budget is out of the way for every bundle.
  const policy = { ...loadPolicy("examples/policies/cloudfront.yaml"), budgetMs: 10_000 };
  const buildWith = (build: typeof buildLambdaEdge, outDir: string) =>
    build({
      policy,
      store: { table: "rate-limits", region: "us-east-1", endpoint },
      outDir: join(work, outDir),
      env: {
        EDGELIMIT_JWT_SECRET: "bench-jwt-secret-of-reasonable-length",
        EDGELIMIT_CHALLENGE_SECRET: "bench-challenge-secret-of-reasonable-length",
      },
    });
  const [ours] = await buildWith(buildLambdaEdge, "ours");
  if (ours === undefined) throw new Error("build produced nothing");
  let before: typeof ours | undefined;
  if (beforeTree !== undefined) {
    const builder = (await import(pathToFileURL(join(beforeTree, "src/cli/build.ts")).href)) as {
      buildLambdaEdge: typeof buildLambdaEdge;
    };
    [before] = await buildWith(builder.buildLambdaEdge, "before");
  }

  const seedEntry = join(work, "seed-entry.mjs");
  writeFileSync(seedEntry, seedHandlerSource(endpoint));
  const seedScript = join(work, "seed.js");
  await bundleForNode(seedEntry, seedScript);
  const { statSync, readFileSync } = await import("node:fs");
  const seedBytes = statSync(seedScript).size;
  const seedZipped = deflateRawSync(readFileSync(seedScript), { level: 9 }).length + 100;

  // The floor: one unsigned UpdateItem over bare node:http, no library, no decision.
  const floorScript = join(work, "floor.js");
  writeFileSync(floorScript, floorHandlerSource(endpoint));
  // The same over raw node:net, the floor of any client on a socket.
  const netFloorScript = join(work, "floor-net.js");
  writeFileSync(netFloorScript, netFloorHandlerSource(endpoint));
  // And over the store's client itself, bundled and minified as the edge build does: what the
  // client costs above raw node:net, without signing, limiter or store.
  const poolEntry = join(work, "floor-pool-entry.ts");
  writeFileSync(poolEntry, poolFloorHandlerSource(endpoint));
  const poolFloorScript = join(work, "floor-pool.js");
  await bundleForNode(poolEntry, poolFloorScript);

  const scripts = [
    floorScript,
    netFloorScript,
    poolFloorScript,
    ours.script,
    seedScript,
    ...(before ? [before.script] : []),
  ];
  const [floorTimes, netFloorTimes, poolFloorTimes, ourTimes, seedTimes, beforeTimes] =
    (await coldStarts(scripts, runs)) as [
      ColdStart,
      ColdStart,
      ColdStart,
      ColdStart,
      ColdStart,
      ColdStart | undefined,
    ];

  const row = (name: string, bytes: number, zipped: number, times: ColdStart) =>
    `| ${name} | ${(bytes / 1024).toFixed(1)} KB | ${(zipped / 1024).toFixed(1)} KB | ${times.load.toFixed(1)} ms | ${times.first.toFixed(1)} ms | ${(times.load + times.first).toFixed(1)} ms |`;
  console.log(`runs per variant: ${runs} (medians), dynalite on ${endpoint}`);
  console.log("| bundle | minified | zipped | module load | first invocation | to first answer |");
  console.log("|---|---|---|---|---|---|");
  console.log(row("edgelimit viewer-request", ours.minifiedBytes, ours.zippedBytes, ourTimes));
  console.log(row("seed-style, AWS SDK v3", seedBytes, seedZipped, seedTimes));
  console.log(row("floor: bare node:http UpdateItem", statSync(floorScript).size, 0, floorTimes));
  console.log(
    row("floor: bare node:net UpdateItem", statSync(netFloorScript).size, 0, netFloorTimes),
  );
  console.log(
    row(
      "floor: HttpPool UpdateItem (the store's client)",
      statSync(poolFloorScript).size,
      0,
      poolFloorTimes,
    ),
  );
  if (before !== undefined && beforeTimes !== undefined) {
    console.log(
      row(
        `edgelimit before (${beforeTree})`,
        before.minifiedBytes,
        before.zippedBytes,
        beforeTimes,
      ),
    );
  }
  const answer = (times: ColdStart) => times.load + times.first;
  const ratio = answer(seedTimes) / answer(ourTimes);
  console.log(
    `size ratio ${(seedBytes / ours.minifiedBytes).toFixed(1)}x smaller; first answer ${ratio.toFixed(1)}x faster`,
  );
  if (beforeTimes !== undefined) {
    console.log(
      `before: ${(answer(seedTimes) / answer(beforeTimes)).toFixed(1)}x faster than the SDK bundle; after/before ${(answer(ourTimes) / answer(beforeTimes)).toFixed(3)}`,
    );
  }
} finally {
  await local.close();
  rmSync(work, { recursive: true, force: true });
}

interface ColdStart {
  readonly load: number;
  readonly first: number;
}

/**
 * Median module load and first invocation of each script over `count` rounds of fresh
 * processes, one process per script per round.
 */
async function coldStarts(scripts: readonly string[], count: number): Promise<ColdStart[]> {
  const samples = scripts.map(() => ({ loads: [] as number[], firsts: [] as number[] }));
  for (let round = 0; round < count; round++) {
    for (const [i, script] of scripts.entries()) {
      const { load, first } = await coldStart(script);
      samples[i]?.loads.push(load);
      samples[i]?.firsts.push(first);
    }
  }
  return samples.map(({ loads, firsts }) => ({ load: median(loads), first: median(firsts) }));
}

/**
 * One fresh process: the bundle loaded as Lambda's Node runtime loads a handler (`require` for
 * `.js`, `import()` for `.mjs`), then its first invocation. Asynchronous on purpose: dynalite
 * runs in this process and must keep answering while a probe waits.
 */
async function coldStart(script: string): Promise<ColdStart> {
  const probe = `
    const { performance } = require("node:perf_hooks");
    (async () => {
    const started = performance.now();
    const { handler } = ${script.endsWith(".mjs") ? `await import(${JSON.stringify(pathToFileURL(script).href)})` : `require(${JSON.stringify(script)})`};
    const loaded = performance.now();
    const event = { Records: [{ cf: { config: { eventType: "viewer-request" }, request: {
      clientIp: "203.0.113.178", method: "GET", uri: "/api/search", querystring: "",
      headers: { host: [{ key: "Host", value: "d111111abcdef8.cloudfront.net" }] } } } }] };
    handler(event).then((result) => {
      const answered = performance.now();
      const counted = result.headers?.["x-ratelimit-remaining"] ?? result.headers?.["x-rate-limit-remaining"];
      if (counted === undefined) throw new Error("not counted (failed open?): " + JSON.stringify(result));
      console.log(JSON.stringify({ load: loaded - started, first: answered - loaded }));
      process.exit(0);
    });
    })();`;
  const result = await promisify(execFile)(process.execPath, ["-e", probe], {
    encoding: "utf8",
    timeout: 20_000,
    env: {
      PATH: process.env.PATH,
      AWS_REGION: "us-east-1",
      AWS_ACCESS_KEY_ID: credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: credentials.secretAccessKey,
    },
  });
  return JSON.parse(result.stdout.trim().split("\n").pop() as string) as ColdStart;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
}

function floorHandlerSource(localEndpoint: string): string {
  const { hostname, port } = new URL(localEndpoint);
  return `
const http = require("node:http");
exports.handler = (event) => new Promise((resolve, reject) => {
  const body = JSON.stringify({ TableName: "rate-limits", Key: { PK: { S: "floor" }, SK: { S: "w" } },
    UpdateExpression: "ADD #c :one", ExpressionAttributeNames: { "#c": "count" },
    ExpressionAttributeValues: { ":one": { N: "1" } }, ReturnValues: "UPDATED_NEW" });
  const request = http.request({ host: ${JSON.stringify(hostname)}, port: ${port}, method: "POST", path: "/",
    headers: { "content-type": "application/x-amz-json-1.0", "x-amz-target": "DynamoDB_20120810.UpdateItem",
      authorization: "AWS4-HMAC-SHA256 Credential=a/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=x",
      "x-amz-date": "20260101T000000Z" } }, (response) => {
    response.resume();
    response.on("end", () => {
      const forwarded = event.Records[0].cf.request;
      forwarded.headers["x-ratelimit-remaining"] = [{ key: "X-RateLimit-Remaining", value: "0" }];
      resolve(forwarded);
    });
  });
  request.on("error", reject);
  request.end(body);
});
`;
}

function netFloorHandlerSource(localEndpoint: string): string {
  const { hostname, port } = new URL(localEndpoint);
  return `
const net = require("node:net");
exports.handler = (event) => new Promise((resolve, reject) => {
  const body = JSON.stringify({ TableName: "rate-limits", Key: { PK: { S: "floor" }, SK: { S: "w" } },
    UpdateExpression: "ADD #c :one", ExpressionAttributeNames: { "#c": "count" },
    ExpressionAttributeValues: { ":one": { N: "1" } }, ReturnValues: "UPDATED_NEW" });
  const socket = net.connect({ host: ${JSON.stringify(hostname)}, port: ${port} });
  socket.write("POST / HTTP/1.1\\r\\nhost: ${hostname}:${port}\\r\\ncontent-type: application/x-amz-json-1.0\\r\\n" +
    "x-amz-target: DynamoDB_20120810.UpdateItem\\r\\nx-amz-date: 20260101T000000Z\\r\\n" +
    "authorization: AWS4-HMAC-SHA256 Credential=a/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=x\\r\\n" +
    "content-length: " + Buffer.byteLength(body) + "\\r\\n\\r\\n" + body);
  let text = "";
  socket.on("data", (data) => {
    text += data.toString("latin1");
    const end = text.indexOf("\\r\\n\\r\\n");
    const length = /content-length: *(\\d+)/i.exec(text);
    if (end === -1 || length === null || text.length < end + 4 + Number(length[1])) return;
    socket.destroy();
    const forwarded = event.Records[0].cf.request;
    forwarded.headers["x-ratelimit-remaining"] = [{ key: "X-RateLimit-Remaining", value: "0" }];
    resolve(forwarded);
  });
  socket.on("error", reject);
});
`;
}

function poolFloorHandlerSource(localEndpoint: string): string {
  const { host } = new URL(localEndpoint);
  return `
import { HttpPool } from ${JSON.stringify(join(process.cwd(), "src/stores/dynamodb/http-pool.ts"))};
const pool = new HttpPool({ origin: new URL(${JSON.stringify(localEndpoint)}) });
export const handler = async (event: { Records: { cf: { request: { headers: Record<string, unknown> } } }[] }) => {
  const body = JSON.stringify({ TableName: "rate-limits", Key: { PK: { S: "floor" }, SK: { S: "w" } },
    UpdateExpression: "ADD #c :one", ExpressionAttributeNames: { "#c": "count" },
    ExpressionAttributeValues: { ":one": { N: "1" } }, ReturnValues: "UPDATED_NEW" });
  const response = await pool.post("/", { host: ${JSON.stringify(host)}, "content-type": "application/x-amz-json-1.0",
    "x-amz-target": "DynamoDB_20120810.UpdateItem", "x-amz-date": "20260101T000000Z",
    authorization: "AWS4-HMAC-SHA256 Credential=a/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=x",
    "content-length": String(Buffer.byteLength(body)) }, body, 3000);
  JSON.parse(response.body.toString("utf8"));
  const forwarded = event.Records[0].cf.request;
  forwarded.headers["x-ratelimit-remaining"] = [{ key: "X-RateLimit-Remaining", value: "0" }];
  return forwarded;
};
`;
}

/** One CommonJS file for Node 20, minified, as a Lambda bundle would be. */
async function bundleForNode(entry: string, outfile: string): Promise<void> {
  await esbuild.build({
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: "node",
    target: "node20",
    format: "cjs",
    minify: true,
    legalComments: "none",
    nodePaths: [join(process.cwd(), "node_modules")],
    logLevel: "silent",
  });
}

/** Seed 000's handler, as published, with the endpoint pointed at the local server. */
function seedHandlerSource(localEndpoint: string): string {
  return `
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { UpdateCommand, DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
const client = new DynamoDBClient({ region: process.env.AWS_REGION, endpoint: ${JSON.stringify(localEndpoint)} });
const doc = DynamoDBDocumentClient.from(client);
const TABLE = "rate-limits";
const LIMITS = {
  anonymous: { perMinute: 60, perPath: { "/api/reports": 5, "/api/export": 3, "/api/search": 30 } },
  authenticated: { perMinute: 300, perPath: { "/api/reports": 30, "/api/export": 20, "/api/search": 120 } },
};
export const handler = async (event) => {
  const request = event.Records[0].cf.request;
  const ip = request.clientIp;
  const uri = request.uri;
  const userId = request.headers["x-user-id"]?.[0]?.value || null;
  const tier = userId ? "authenticated" : "anonymous";
  const identity = userId ? "USER#" + userId : "IP#" + ip;
  const windowTs = Math.floor(Date.now() / 60000);
  const windowKey = windowTs.toString();
  const ttl = windowTs * 60 + 300;
  const pathLimit = matchPathLimit(uri, LIMITS[tier]);
  if (pathLimit) {
    const result = await incrementAndCheck(identity + "#PATH#" + pathLimit.path, windowKey, pathLimit.limit, ttl);
    if (!result.allowed) return rateLimitResponse(result, pathLimit.limit);
  }
  const globalResult = await incrementAndCheck(identity + "#PATH#global", windowKey, LIMITS[tier].perMinute, ttl);
  if (!globalResult.allowed) return rateLimitResponse(globalResult, LIMITS[tier].perMinute);
  request.headers["x-rate-limit-remaining"] = [{ key: "X-RateLimit-Remaining", value: String(globalResult.remaining) }];
  return request;
};
async function incrementAndCheck(pk, sk, limit, ttl) {
  try {
    const result = await doc.send(new UpdateCommand({
      TableName: TABLE, Key: { PK: pk, SK: sk },
      UpdateExpression: "ADD #c :one SET #t = if_not_exists(#t, :ttl)",
      ExpressionAttributeNames: { "#c": "count", "#t": "ttl" },
      ExpressionAttributeValues: { ":one": 1, ":ttl": ttl },
      ReturnValues: "UPDATED_NEW",
    }));
    const count = Number(result.Attributes?.count ?? 1);
    return { allowed: count <= limit, count, remaining: Math.max(0, limit - count) };
  } catch (err) {
    console.error("Rate limit check failed:", err);
    return { allowed: true, count: 0, remaining: limit };
  }
}
function matchPathLimit(uri, limits) {
  if (!limits.perPath) return null;
  for (const [path, limit] of Object.entries(limits.perPath)) if (uri.startsWith(path)) return { path, limit };
  return null;
}
function rateLimitResponse(result, limit) {
  return { status: "429", statusDescription: "Too Many Requests", headers: {
    "content-type": [{ key: "Content-Type", value: "application/json" }],
    "retry-after": [{ key: "Retry-After", value: "60" }] },
    body: JSON.stringify({ error: "rate_limit_exceeded", retry_after: 60 }) };
}
`;
}
