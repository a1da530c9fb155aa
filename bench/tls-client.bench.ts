/**
 * The DynamoDB client's transport over TLS, the path production uses: a fresh process's first
 * signed UpdateItem through the store's `HttpPool` (`node:https` with a keep-alive Agent) and,
 * given another checkout, through that checkout's HTTP/1.1 client of our own (`Http1Pool`,
 * node:net + node:tls, removed after this measurement: commit eea3c1c has it). Each client is
 * bundled and minified as the Lambda@Edge build does; each process loads it (module load) and
 * makes one call (first call). With `preconnect`, the bundle opens its socket while it loads,
 * as the edge build does.
 *
 * The endpoint is a TLS server (test/support/tls.ts, a self-signed certificate made with
 * openssl, verified by each process: see bench/support/trust-ca.ts) piping to dynalite on
 * loopback. Every round runs each variant once, in turn, and the order rotates between rounds.
 *
 *   npx tsx bench/tls-client.bench.ts [rounds=31] [http1-tree]
 *
 * `http1-tree`: a checkout with src/stores/http1/pool.ts, e.g.
 * `git archive eea3c1c | tar -x -C /tmp/el-http1` (and node_modules linked).
 */
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import * as esbuild from "esbuild";
import { createRateLimitTable, startDynalite, TEST_CREDENTIALS } from "../test/dynamodb/harness.js";
import { startTlsTerminator } from "../test/support/tls.js";
import { trustCa } from "./support/trust-ca.js";

const rounds = Number(process.argv[2] ?? 31);
const http1Tree = process.argv[3];
const work = mkdtempSync(join(tmpdir(), "edgelimit-tls-bench-"));
const local = await startDynalite();
const tls = await startTlsTerminator(work, Number(new URL(local.endpoint).port));
const { endpoint, caFile: certFile } = tls;

interface Variant {
  readonly name: string;
  readonly script: string;
  readonly loads: number[];
  readonly firsts: number[];
  readonly totals: number[];
}

try {
  await createRateLimitTable(local.client, "rate-limits");
  const variants: Variant[] = [];
  const clients = http1Tree === undefined ? ["https-agent"] : ["http1", "https-agent"];
  for (const client of clients as ("http1" | "https-agent")[]) {
    for (const preconnect of [true, false]) {
      const name = `${client}${preconnect ? " + preconnect" : ""}`;
      const entry = join(work, `${client}-${preconnect}.ts`);
      writeFileSync(entry, entrySource(client, preconnect));
      const script = join(work, `${client}-${preconnect}.js`);
      await esbuild.build({
        entryPoints: [entry],
        outfile: script,
        bundle: true,
        platform: "node",
        target: "node20",
        format: "cjs",
        minify: true,
        legalComments: "none",
        logLevel: "silent",
      });
      variants.push({ name, script, loads: [], firsts: [], totals: [] });
    }
  }
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < variants.length; i++) {
      const variant = variants[(round + i) % variants.length] as Variant;
      const { load, first } = await coldStart(variant.script);
      variant.loads.push(load);
      variant.firsts.push(first);
      variant.totals.push(load + first);
    }
  }
  console.log(`rounds: ${rounds} (medians), TLS endpoint ${endpoint} in front of dynalite`);
  console.log("| client | minified | module load | first call | to first answer |");
  console.log("|---|---:|---:|---:|---:|");
  for (const variant of variants) {
    console.log(
      `| ${variant.name} | ${(statSync(variant.script).size / 1024).toFixed(1)} KB | ${median(variant.loads).toFixed(1)} ms | ${median(variant.firsts).toFixed(1)} ms | ${median(variant.totals).toFixed(1)} ms |`,
    );
  }
  for (const suffix of [" + preconnect", ""]) {
    const ours = variants.find((variant) => variant.name === `http1${suffix}`);
    const agent = variants.find((variant) => variant.name === `https-agent${suffix}`) as Variant;
    if (ours === undefined) continue;
    const paired = ours.totals.map((total, i) => total / (agent.totals[i] as number));
    console.log(
      `http1/https-agent${suffix}: ratio of medians ${(median(ours.totals) / median(agent.totals)).toFixed(3)}, median of per-round ratios ${median(paired).toFixed(3)} (p25 ${quantile(paired, 0.25).toFixed(3)}, p75 ${quantile(paired, 0.75).toFixed(3)})`,
    );
  }
} finally {
  tls.close();
  await local.close();
  rmSync(work, { recursive: true, force: true });
}

function entrySource(client: "http1" | "https-agent", preconnect: boolean): string {
  const root = process.cwd();
  const pool =
    client === "http1"
      ? `import { Http1Pool as Pool } from ${JSON.stringify(join(http1Tree as string, "src/stores/http1/pool.ts"))};`
      : `import { HttpPool as Pool } from ${JSON.stringify(join(root, "src/stores/dynamodb/http-pool.ts"))};`;
  return `
${pool}
import { signDynamoDbRequest } from ${JSON.stringify(join(root, "src/aws/sigv4.ts"))};
const origin = new URL(${JSON.stringify(endpoint)});
const pool = new Pool({ origin });
${preconnect ? "pool.preconnect();" : ""}
export const handler = async () => {
  const body = JSON.stringify({ TableName: "rate-limits", Key: { PK: { S: "tls-bench" }, SK: { S: "w" } },
    UpdateExpression: "ADD #c :one", ExpressionAttributeNames: { "#c": "count" },
    ExpressionAttributeValues: { ":one": { N: "1" } }, ReturnValues: "UPDATED_NEW" });
  const headers = signDynamoDbRequest({ region: "us-east-1", host: origin.host, operation: "UpdateItem", body,
    credentials: { accessKeyId: process.env.AWS_ACCESS_KEY_ID!, secretAccessKey: process.env.AWS_SECRET_ACCESS_KEY! },
    now: new Date() });
  const response = await pool.post("/", headers, body, 3000);
  if (response.status !== 200) throw new Error("HTTP " + response.status + " " + response.body);
  return JSON.parse(response.body.toString("utf8"));
};
`;
}

async function coldStart(script: string): Promise<{ load: number; first: number }> {
  const probe = `
    const { performance } = require("node:perf_hooks");
    ${trustCa(certFile)}
    const started = performance.now();
    const { handler } = require(${JSON.stringify(script)});
    const loaded = performance.now();
    handler().then((answer) => {
      if (answer.Attributes?.count === undefined) throw new Error("no count: " + JSON.stringify(answer));
      console.log(JSON.stringify({ load: loaded - started, first: performance.now() - loaded }));
      process.exit(0);
    });`;
  const result = await promisify(execFile)(process.execPath, ["-e", probe], {
    encoding: "utf8",
    timeout: 20_000,
    env: {
      PATH: process.env.PATH,
      AWS_ACCESS_KEY_ID: TEST_CREDENTIALS.accessKeyId,
      AWS_SECRET_ACCESS_KEY: TEST_CREDENTIALS.secretAccessKey,
    },
  });
  const last = result.stdout.trim().split("\n").pop() ?? "";
  if (!last.startsWith("{")) throw new Error(`${script}: no timing; stderr: ${result.stderr}`);
  return JSON.parse(last);
}

function median(values: readonly number[]): number {
  return quantile(values, 0.5);
}

function quantile(values: readonly number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))] as number;
}
