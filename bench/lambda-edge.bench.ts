/**
 * Lambda@Edge bundle size and cold start: edgelimit's viewer-request bundle (built by
 * `edgelimit build lambda-edge`) against a seed-style bundle of the same job written with the
 * full AWS SDK v3 (`@aws-sdk/client-dynamodb` + `@aws-sdk/lib-dynamodb`), both minified by
 * esbuild. Cold start = a fresh node process: module load, then the first invocation against a
 * dynalite server on loopback.
 *
 *   npx tsx bench/lambda-edge.bench.ts [runs=9] [before-tree] [--plain | --both]
 *
 * By default every bundle speaks https, as DynamoDB's endpoints do in production: a TLS server
 * (test/support/tls.ts, a self-signed certificate for 127.0.0.1) in front of dynalite, whose
 * certificate each fresh process verifies (see `trustCa`). `--plain` measures plain http to
 * dynalite instead; `--both` measures both transports in the same rounds.
 *
 * `before-tree` is another checkout of this repository (for example `git archive HEAD` unpacked
 * in a temporary directory, with node_modules linked): its `edgelimit build` builds a second
 * viewer-request bundle for the same endpoint, measured in the same rounds. Every round runs
 * each variant once, in turn, so a burst of load from other jobs falls on all of them.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { deflateRawSync } from "node:zlib";
import * as esbuild from "esbuild";
import { buildLambdaEdge } from "../src/cli/build.js";
import { loadPolicy } from "../src/policy/load.js";
import { createRateLimitTable, startDynalite, TEST_CREDENTIALS } from "../test/dynamodb/harness.js";
import { startTlsTerminator } from "../test/support/tls.js";
import { trustCa } from "./support/trust-ca.js";

const flags = process.argv.slice(2).filter((arg) => arg.startsWith("--"));
const [runsArg, beforeTree] = process.argv.slice(2).filter((arg) => !arg.startsWith("--"));
const runs = Number(runsArg ?? 9);
const transports: readonly Transport[] = flags.includes("--both")
  ? ["https", "http"]
  : flags.includes("--plain")
    ? ["http"]
    : ["https"];
const work = mkdtempSync(join(tmpdir(), "edgelimit-bench-"));
const credentials = TEST_CREDENTIALS;

type Transport = "https" | "http";

interface Variant {
  readonly name: string;
  readonly script: string;
  readonly bytes: number;
  /** Zipped size, for the bundles a deployment ships. */
  readonly zipped?: number;
  /** The CA a fresh process trusts (https only). */
  readonly caFile: string | undefined;
}

const local = await startDynalite();
const tls = await startTlsTerminator(work, Number(new URL(local.endpoint).port));

try {
  await createRateLimitTable(local.client, "rate-limits");

  // The seed policy's 50 ms budget would turn a cold start slowed by other jobs on this machine
  // into a fail-open answer at 50 ms (and a failed probe): measured here is the time to the
  // real answer, so the budget is out of the way for every bundle.
  const policy = { ...loadPolicy("examples/policies/cloudfront.yaml"), budgetMs: 10_000 };
  const before =
    beforeTree === undefined
      ? undefined
      : (
          (await import(pathToFileURL(join(beforeTree, "src/cli/build.ts")).href)) as {
            buildLambdaEdge: typeof buildLambdaEdge;
          }
        ).buildLambdaEdge;

  const groups: { transport: Transport; endpoint: string; variants: Variant[] }[] = [];
  for (const transport of transports) {
    const endpoint = transport === "https" ? tls.endpoint : local.endpoint;
    const caFile = transport === "https" ? tls.caFile : undefined;
    const dir = (name: string) => join(work, `${transport}-${name.replace(/[^a-z0-9]+/gi, "-")}`);
    const edgeBundle = async (name: string, build: typeof buildLambdaEdge): Promise<Variant> => {
      const [built] = await build({
        policy,
        store: { table: "rate-limits", region: "us-east-1", endpoint },
        outDir: dir(name),
        env: {
          EDGELIMIT_JWT_SECRET: "bench-jwt-secret-of-reasonable-length",
          EDGELIMIT_CHALLENGE_SECRET: "bench-challenge-secret-of-reasonable-length",
        },
      });
      if (built === undefined) throw new Error("build produced nothing");
      const { script, minifiedBytes: bytes, zippedBytes: zipped } = built;
      return { name, script, bytes, zipped, caFile };
    };
    const bundled = async (name: string, source: string, extension: string): Promise<Variant> => {
      const entry = `${dir(name)}-entry.${extension}`;
      writeFileSync(entry, source);
      const script = `${dir(name)}.js`;
      await bundleForNode(entry, script);
      const bytes = statSync(script).size;
      const zipped = deflateRawSync(readFileSync(script), { level: 9 }).length + 100;
      return { name, script, bytes, zipped, caFile };
    };
    const plainScript = (name: string, source: string): Variant => {
      const script = `${dir(name)}.js`;
      writeFileSync(script, source);
      return { name, script, bytes: statSync(script).size, caFile };
    };
    const variants = [
      await edgeBundle("edgelimit viewer-request", buildLambdaEdge),
      await bundled("seed-style, AWS SDK v3", seedHandlerSource(endpoint), "mjs"),
      // The floor: one unsigned UpdateItem over bare node:http(s), no library, no decision.
      plainScript(`floor: bare node:${transport} UpdateItem`, floorHandlerSource(endpoint)),
      // The same over raw node:net (node:tls), the floor of any client on a socket.
      plainScript(
        `floor: bare node:${transport === "https" ? "tls" : "net"} UpdateItem`,
        netFloorHandlerSource(endpoint),
      ),
      // And over the store's client itself, bundled and minified as the edge build does: what
      // the client costs above the bare module, without signing, limiter or store.
      await bundled(
        "floor: HttpPool UpdateItem (the store's client)",
        poolFloorHandlerSource(endpoint),
        "ts",
      ),
      ...(before ? [await edgeBundle(`edgelimit before (${beforeTree})`, before)] : []),
    ];
    groups.push({ transport, endpoint, variants });
  }

  const times = await coldStarts(
    groups.flatMap((group) => group.variants),
    runs,
  );
  const row = (variant: Variant, sample: Samples) =>
    `| ${variant.name} | ${(variant.bytes / 1024).toFixed(1)} KB | ${variant.zipped === undefined ? "" : `${(variant.zipped / 1024).toFixed(1)} KB`} | ${median(sample.loads).toFixed(1)} ms | ${median(sample.firsts).toFixed(1)} ms | ${median(sample.answers).toFixed(1)} ms |`;
  console.log(`runs per variant: ${runs} (medians)`);
  for (const { transport, endpoint, variants } of groups) {
    const sample = (variant: Variant) => times.get(variant) as Samples;
    const [ours, seed] = variants as [Variant, Variant];
    const previous = before === undefined ? undefined : (variants.at(-1) as Variant);
    console.log(
      `\n${transport}: dynalite${transport === "https" ? " behind TLS" : ""}, ${endpoint}`,
    );
    console.log(
      "| bundle | minified | zipped | module load | first invocation | to first answer |",
    );
    console.log("|---|---|---|---|---|---|");
    for (const variant of variants) console.log(row(variant, sample(variant)));
    console.log(
      `${transport}: size ratio ${(seed.bytes / ours.bytes).toFixed(1)}x smaller; first answer ${speedup(sample(seed), sample(ours))}`,
    );
    if (previous !== undefined) {
      console.log(
        `${transport}: before: first answer ${speedup(sample(seed), sample(previous))}; after/before ${(median(sample(ours).answers) / median(sample(previous).answers)).toFixed(3)}`,
      );
    }
  }
} finally {
  tls.close();
  await local.close();
  rmSync(work, { recursive: true, force: true });
}

/**
 * How much sooner `ours` answers than the SDK bundle: the ratio of the medians, then the
 * median and quartiles of the rounds' own ratios (both ran in the same round).
 */
function speedup(seed: Samples, ours: Samples): string {
  const rounds = seed.answers.map((answer, i) => answer / (ours.answers[i] as number));
  const times = (value: number) => `${value.toFixed(1)}x`;
  return `${times(median(seed.answers) / median(ours.answers))} sooner (per round: median ${times(median(rounds))}, p25-p75 ${times(quantile(rounds, 0.25))}-${times(quantile(rounds, 0.75))})`;
}

interface Samples {
  readonly loads: number[];
  readonly firsts: number[];
  /** Module load + first invocation, per round. */
  readonly answers: number[];
}

/**
 * Module load and first invocation of each variant over `count` rounds of fresh processes, one
 * process per variant per round.
 */
async function coldStarts(
  variants: readonly Variant[],
  count: number,
): Promise<Map<Variant, Samples>> {
  const samples = new Map(
    variants.map((variant) => [variant, { loads: [], firsts: [], answers: [] } as Samples]),
  );
  for (let round = 0; round < count; round++) {
    for (const [variant, sample] of samples) {
      const { load, first } = await coldStart(variant);
      sample.loads.push(load);
      sample.firsts.push(first);
      sample.answers.push(load + first);
    }
  }
  return samples;
}

/**
 * One fresh process: the bundle loaded as Lambda's Node runtime loads a handler (`require` for
 * `.js`, `import()` for `.mjs`), then its first invocation. Asynchronous on purpose: dynalite
 * runs in this process and must keep answering while a probe waits.
 */
async function coldStart({ script, caFile }: Variant): Promise<{ load: number; first: number }> {
  const probe = `
    const { performance } = require("node:perf_hooks");
    ${caFile === undefined ? "" : trustCa(caFile)}
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
  const last = result.stdout.trim().split("\n").pop() ?? "";
  if (!last.startsWith("{")) throw new Error(`${script}: no timing; stderr: ${result.stderr}`);
  return JSON.parse(last) as { load: number; first: number };
}

function median(values: readonly number[]): number {
  return quantile(values, 0.5);
}

function quantile(values: readonly number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))] as number;
}

function floorHandlerSource(localEndpoint: string): string {
  const { hostname, port, protocol } = new URL(localEndpoint);
  return `
const http = require("node:${protocol === "https:" ? "https" : "http"}");
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
  const { hostname, port, protocol } = new URL(localEndpoint);
  return `
const net = require("node:${protocol === "https:" ? "tls" : "net"}");
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
