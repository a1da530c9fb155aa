/**
 * What operators' overrides cost the Lambda@Edge viewer-request function: a one-rule policy's
 * bundle (a limit no run reaches) built without them and with them (`edgelimit build
 * lambda-edge --overrides`), each in fresh processes against dynalite behind TLS (as DynamoDB
 * is reached in production), with 20 overrides in the table, one of them the measured
 * client's (a raised limit).
 *
 *   npx tsx bench/lambda-edge-overrides.bench.ts [runs=7] [warm=200]
 *
 * Per round and variant, one fresh process: module load, the first answer (with overrides, the
 * first read begun at load is waited for), then `warm` more invocations one after another (the
 * median and p99 of each). Every round runs both variants, in turn, so a burst of load from
 * other jobs falls on both. The DynamoDB calls behind these figures are counted in
 * test/lambda-edge/overrides.test.ts.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { buildLambdaEdge } from "../src/cli/build.js";
import { definePolicy } from "../src/policy/load.js";
import { DynamoDbOverrides } from "../src/stores/dynamodb/overrides.js";
import { createRateLimitTable, startDynalite, TEST_CREDENTIALS } from "../test/dynamodb/harness.js";
import { startTlsTerminator } from "../test/support/tls.js";
import { median } from "./support/median.js";
import { trustCa } from "./support/trust-ca.js";

const [runsArg, warmArg] = process.argv.slice(2);
const runs = Number(runsArg ?? 7);
const warm = Number(warmArg ?? 200);
const work = mkdtempSync(join(tmpdir(), "edgelimit-bench-overrides-"));
const local = await startDynalite();
const tls = await startTlsTerminator(work, Number(new URL(local.endpoint).port));
const CLIENT_IP = "203.0.113.178";

interface Sample {
  readonly load: number;
  readonly first: number;
  readonly warmMedian: number;
  readonly warmP99: number;
}

try {
  await createRateLimitTable(local.client, "rate-limits");
  const source = new DynamoDbOverrides(local.client, "rate-limits");
  const now = Date.now();
  for (let i = 0; i < 19; i++) {
    const subject = `user:u_partner${i}`;
    await source.put({ subject, scope: "all", effect: "limit", limit: 500, setAt: now }, now, 100);
  }
  const subject = `ip:${CLIENT_IP}`;
  await source.put(
    { subject, scope: "all", effect: "limit", limit: 100_000, setAt: now },
    now,
    100,
  );
  // The 50 ms budget would turn a start slowed by other jobs into a fail-open answer: measured
  // here is the time to the real one.
  const policy = definePolicy({
    version: 1,
    budget: 10_000,
    tiers: { anonymous: { global: { limit: 1_000_000, window: "60s" } } },
  });
  const variants: { name: string; script: string; files: string }[] = [];
  for (const overrides of [false, true]) {
    const [built] = await buildLambdaEdge({
      policy,
      store: { table: "rate-limits", region: "us-east-1", endpoint: tls.endpoint },
      outDir: join(work, String(overrides)),
      env: {},
      overrides,
    });
    if (built === undefined) throw new Error("build produced nothing");
    variants.push({
      name: overrides ? "with overrides (--overrides)" : "without (--no-overrides)",
      script: built.script,
      files: built.files.join(" "),
    });
  }
  const samples = new Map(variants.map((variant) => [variant, [] as Sample[]]));
  for (let round = 0; round < runs; round++) {
    for (const [variant, list] of samples) list.push(await probe(variant.script));
  }
  const ms = (values: number[]) => `${median(values).toFixed(2)} ms`;
  console.log(`runs per variant: ${runs}, ${warm} warm invocations each (medians of rounds)`);
  console.log("| bundle | module load | first answer | warm median | warm p99 | files |");
  console.log("|---|---|---|---|---|---|");
  for (const [variant, list] of samples) {
    console.log(
      `| ${variant.name} | ${ms(list.map((s) => s.load))} | ${ms(list.map((s) => s.first))} | ${ms(list.map((s) => s.warmMedian))} | ${ms(list.map((s) => s.warmP99))} | ${variant.files} |`,
    );
  }
  // Both ran in the same round: the round's own difference is steadier than the medians'.
  const [without, withOverrides] = [...samples.values()] as [Sample[], Sample[]];
  const added = (pick: (sample: Sample) => number) =>
    ms(withOverrides.map((sample, round) => pick(sample) - pick(without[round] as Sample)));
  console.log(
    `added by overrides, median of the rounds' differences: load ${added((s) => s.load)}, to the first answer ${added((s) => s.load + s.first)}, warm median ${added((s) => s.warmMedian)}`,
  );
} finally {
  tls.close();
  await local.close();
  rmSync(work, { recursive: true, force: true });
}

/** One fresh process, as Lambda's Node runtime loads a handler; asynchronous: dynalite is here. */
async function probe(script: string): Promise<Sample> {
  const source = `
    const { performance } = require("node:perf_hooks");
    ${trustCa(tls.caFile)}
    (async () => {
      const started = performance.now();
      const { handler } = require(${JSON.stringify(script)});
      const loaded = performance.now();
      const event = () => ({ Records: [{ cf: { config: { eventType: "viewer-request" }, request: {
        clientIp: ${JSON.stringify(CLIENT_IP)}, method: "GET", uri: "/", querystring: "",
        headers: { host: [{ key: "Host", value: "d111111abcdef8.cloudfront.net" }] } } } }] });
      const first = await handler(event());
      if (first.status !== undefined) throw new Error("refused: " + JSON.stringify(first));
      const answered = performance.now();
      const times = [];
      for (let i = 0; i < ${warm}; i++) {
        const at = performance.now();
        const result = await handler(event());
        if (result.status !== undefined) throw new Error("refused: " + JSON.stringify(result));
        times.push(performance.now() - at);
      }
      times.sort((a, b) => a - b);
      const at = (q) => times[Math.min(times.length - 1, Math.floor(times.length * q))];
      console.log(JSON.stringify({ load: loaded - started, first: answered - loaded,
        warmMedian: at(0.5), warmP99: at(0.99) }));
      process.exit(0);
    })();`;
  const result = await promisify(execFile)(process.execPath, ["-e", source], {
    encoding: "utf8",
    timeout: 60_000,
    env: {
      PATH: process.env.PATH,
      AWS_REGION: "us-east-1",
      AWS_ACCESS_KEY_ID: TEST_CREDENTIALS.accessKeyId,
      AWS_SECRET_ACCESS_KEY: TEST_CREDENTIALS.secretAccessKey,
    },
  });
  const last = result.stdout.trim().split("\n").pop() ?? "";
  if (!last.startsWith("{")) throw new Error(`${script}: no timing; stderr: ${result.stderr}`);
  return JSON.parse(last) as Sample;
}
