/**
 * The simulator's pace: one simulated hour of 1,000 requests/s (3.6 M requests: seed document 000's
 * 800/s scraper and 200/s of legitimate clients over four regions) through the real engine and
 * `DynamoDbStore` on a four-replica global table, one mode per run. The target is at most 60 s
 * of wall time on one core. First, five simulated minutes with a microtask drain after every
 * event against one per virtual instant (what event-loop.ts does), which is how that choice
 * was made. Run: npm run bench -- simulate (exact, two-writes and hybrid in turn), or
 * npx tsx bench/simulate.bench.ts [MODE...]
 */
import { resolve } from "node:path";
import { simulate } from "../src/simulate/run.js";
import { parseScenario } from "../src/simulate/scenario.js";

const RTT = {
  "us-east-1": { "us-east-1": 6, "eu-west-1": 75, "ap-southeast-1": 220, "sa-east-1": 115 },
  "eu-west-1": { "us-east-1": 75, "eu-west-1": 6, "ap-southeast-1": 160, "sa-east-1": 185 },
  "ap-southeast-1": { "us-east-1": 220, "eu-west-1": 160, "ap-southeast-1": 6, "sa-east-1": 330 },
  "sa-east-1": { "us-east-1": 115, "eu-west-1": 185, "ap-southeast-1": 330, "sa-east-1": 6 },
};

function scenario(duration: string, mode: string) {
  return parseScenario(
    {
      name: "hour-1000rps",
      duration,
      policy: "examples/policies/cloudfront.yaml",
      modes: [mode],
      regions: {
        "us-east-1": { weight: 4 },
        "eu-west-1": { weight: 3 },
        "ap-southeast-1": { weight: 2 },
        "sa-east-1": { weight: 1 },
      },
      store: { kind: "dynamodb", replicas: Object.keys(RTT), rttMs: RTT, jitterMs: 1 },
      deployment: { kind: "lambda-edge" },
      traffic: {
        legitimate: [
          {
            clients: 2000,
            requestsPerMinute: 4,
            paths: { "/api/products": 0.8, "/api/search": 0.15, "/api/reports": 0.05 },
          },
          {
            clients: 200,
            tier: "authenticated",
            requestsPerMinute: 20,
            paths: { "/api/products": 1 },
          },
        ],
        attackers: [{ kind: "scraper", requestsPerSecond: 800, regions: ["us-east-1"] }],
      },
    },
    resolve("."),
    "bench",
  );
}

async function timed(duration: string, mode: string, drainEach: "instant" | "event") {
  const started = performance.now();
  const report = await simulate(scenario(duration, mode), { drainEach });
  const seconds = (performance.now() - started) / 1000;
  const result = report.modes[0];
  if (result === undefined) throw new Error("no mode ran");
  return {
    seconds,
    requests: result.requests,
    events: result.loop.events,
    drains: result.loop.drains,
  };
}

const modes = process.argv.slice(2);
for (const mode of modes.length > 0 ? modes : ["exact", "two-writes", "hybrid"]) {
  for (const drainEach of ["event", "instant"] as const) {
    const run = await timed("5m", mode, drainEach);
    process.stdout.write(
      `${mode}, drain per ${drainEach}: 5 simulated minutes, ${run.requests.toLocaleString("en-US")} requests in ${run.seconds.toFixed(2)} s (${Math.round(run.requests / run.seconds).toLocaleString("en-US")} requests/s; ${run.events.toLocaleString("en-US")} events, ${run.drains.toLocaleString("en-US")} drains)\n`,
    );
  }
  const hour = await timed("1h", mode, "instant");
  process.stdout.write(
    `${mode}: one simulated hour, ${hour.requests.toLocaleString("en-US")} requests in ${hour.seconds.toFixed(1)} s wall (${Math.round(hour.requests / hour.seconds).toLocaleString("en-US")} requests/s; ${hour.events.toLocaleString("en-US")} events, ${hour.drains.toLocaleString("en-US")} drains; target <= 60 s)\n`,
  );
}
