/**
 * `npx tsx bench/gateway.bench.ts` (or `npm run bench -- gateway`): what limiting costs the
 * gateway, and how it compares with nginx `limit_req`, on loopback, in one run. Needs wrk and
 * nginx (`apt-get install wrk nginx-light`); builds the CLI first (`npm run build`) and runs
 * `dist/cli/main.js`, as users do.
 *
 * Targets, each one process, all proxying to the same single-process Node upstream:
 *   direct     the upstream alone (the ceiling)
 *   no-limit   `edgelimit serve --no-limit`: the same proxy with the limiter off
 *   edgelimit  `edgelimit serve`, memory store, examples/policies/cloudfront.yaml; one process
 *              per traffic shape, so that shapes do not share counters
 *   nginx      `limit_req` per client address (one process, `master_process off`)
 * Traffic shapes (client address in X-Forwarded-For, which the policy trusts from loopback):
 *   returning  10,000 clients cycling (counters mostly updated, some clients refused)
 *   new        a new client per request (two memory-store inserts per request)
 *   refused    one client far over its limit: every answer is the gateway's own 429
 *
 * The primary figure is CPU time per request: the serving process's utime + stime
 * (/proc/<pid>/stat) over a saturating wrk run, divided by the requests wrk completed. wrk, the
 * upstream and the gateway share the machine's cores, so req/s measures the scheduler as much
 * as the gateway; CPU per request does not. It is printed beside req/s and p99 at saturation,
 * and p99 at fixed request rates well below saturation (an open-loop generator in this process).
 * Rounds interleave the targets (reversed every other round); figures are medians, and the
 * on/off comparisons are medians of per-round ratios.
 *
 * Knobs: GATEWAY_BENCH_SECONDS (each wrk run, default 2), GATEWAY_BENCH_ROUNDS (default 5),
 * GATEWAY_BENCH_RATES (fixed rates in req/s, default "1000,3000"), GATEWAY_BENCH_SHAPES (default
 * "returning,new,refused"), GATEWAY_BENCH_BEFORE (another checkout of this repository, built
 * with `npm run build`: its gateway runs each shape too, in the same rounds, and is compared
 * with this tree's).
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { median } from "./support/median.js";
import { limitReqHttp, startNginx as startNginxProcess } from "./support/nginx.js";
import { type OpenLoopResult, openLoop } from "./support/open-loop.js";
import {
  cpuSeconds,
  freePort,
  type Server,
  startServer,
  stopServers,
} from "./support/processes.js";

const WRK_SECONDS = Number(process.env.GATEWAY_BENCH_SECONDS ?? 2);
const WARMUP_SECONDS = 2;
const ROUNDS = Number(process.env.GATEWAY_BENCH_ROUNDS ?? 5);
const RATES = (process.env.GATEWAY_BENCH_RATES ?? "1000,3000")
  .split(",")
  .map(Number)
  .filter(Boolean);
const RATE_SECONDS = 2;
const BEFORE = process.env.GATEWAY_BENCH_BEFORE;
const CONNECTIONS = 32;
const OPEN_LOOP_CONNECTIONS = 64;
const POPULATION = 10_000;
const PATH = "/api/search?q=shoes";
const POLICY = "examples/policies/cloudfront.yaml";
const UPSTREAM_BODY = '{"ok":true,"items":[1,2,3]}';

const ALL_SHAPES = ["returning", "new", "refused"] as const;
type Shape = (typeof ALL_SHAPES)[number];
const SHAPES = (process.env.GATEWAY_BENCH_SHAPES ?? ALL_SHAPES.join(","))
  .split(",")
  .filter((shape): shape is Shape => (ALL_SHAPES as readonly string[]).includes(shape));

const dir = mkdtempSync(join(tmpdir(), "edgelimit-gw-bench-"));

interface Target extends Server {
  readonly name: string;
}

// ---- targets ---------------------------------------------------------------------------------

async function startUpstream(): Promise<Target> {
  const port = await freePort();
  const source = `const body = ${JSON.stringify(UPSTREAM_BODY)}; require("node:http").createServer((req, res) => { res.writeHead(200, { "content-type": "application/json" }); res.end(body); }).listen(${port}, "127.0.0.1")`;
  return { name: "direct", ...(await startServer(port, [process.execPath, "-e", source])) };
}

async function startGateway(
  name: string,
  upstream: Target,
  extra: string[],
  tree = ".",
): Promise<Target> {
  const port = await freePort();
  // Each tree reads its own copy of the example policy: an older tree may not know a newer
  // option (failMode: local).
  const policy = join(tree, POLICY);
  const argv = [process.execPath, join(tree, "dist/cli/main.js"), "serve", "--policy", policy];
  argv.push("--upstream", `http://127.0.0.1:${upstream.port}`, "--host", "127.0.0.1");
  argv.push("--port", String(port), "--admin-port", String(await freePort()), ...extra);
  // The example policy names a JWT and a challenge secret; the bench's traffic uses neither.
  const secrets = {
    EDGELIMIT_JWT_SECRET: "bench-secret-not-used-by-anonymous-traffic",
    EDGELIMIT_CHALLENGE_SECRET: "bench-challenge-secret-not-used",
  };
  return { name, ...(await startServer(port, argv, { ...process.env, ...secrets })) };
}

async function startNginx(upstream: Target): Promise<Target> {
  return {
    name: "nginx",
    ...(await startNginxProcess(join(dir, "nginx"), limitReqHttp(upstream.port))),
  };
}

// ---- load: wrk at saturation ------------------------------------------------------------------

/** One wrk Lua script per shape: the client address each request carries. */
const WRK_SCRIPTS: Record<Shape, string> = {
  returning: `local n = 0
request = function()
  n = n + 1
  local i = n % ${POPULATION}
  local ip = "10.9." .. math.floor(i / 250) .. "." .. (i % 250 + 1)
  return wrk.format("GET", "${PATH}", { ["X-Forwarded-For"] = ip })
end`,
  new: `math.randomseed(42)
request = function()
  local ip = "10." .. math.random(0, 255) .. "." .. math.random(0, 255) .. "." .. math.random(1, 254)
  return wrk.format("GET", "${PATH}", { ["X-Forwarded-For"] = ip })
end`,
  refused: `request = function()
  return wrk.format("GET", "${PATH}", { ["X-Forwarded-For"] = "203.0.113.66" })
end`,
};

interface Saturated {
  readonly requestsPerSecond: number;
  readonly p99Ms: number;
  readonly refusedShare: number;
  /** The serving process's CPU per completed request, in µs. */
  readonly cpuMicros: number;
}

function wrk(target: Target, shape: Shape, seconds: number): Saturated {
  const script = join(dir, `${shape}.lua`);
  writeFileSync(script, WRK_SCRIPTS[shape]);
  const before = cpuSeconds(target.pid);
  const url = `http://127.0.0.1:${target.port}`;
  const args = ["-t1", `-c${CONNECTIONS}`, `-d${seconds}s`, "--latency", "-s", script, url];
  const output = execFileSync("wrk", args, { encoding: "utf8" });
  const cpu = cpuSeconds(target.pid) - before;
  const requests = Number(/(\d+) requests in/.exec(output)?.[1]);
  const p99 = /\s99%\s+([\d.]+)(us|ms|s)/.exec(output);
  const unit = { us: 0.001, ms: 1, s: 1000 }[(p99?.[2] ?? "ms") as "us" | "ms" | "s"];
  return {
    requestsPerSecond: Number(/Requests\/sec:\s+([\d.]+)/.exec(output)?.[1]),
    p99Ms: Number(p99?.[1]) * unit,
    refusedShare: Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(output)?.[1] ?? 0) / requests,
    cpuMicros: (cpu / requests) * 1e6,
  };
}

// ---- load: a fixed rate -------------------------------------------------------------------

/** The request text for the index-th request of a shape (addresses apart from wrk's). */
function requestText(shape: Shape): (index: number) => string {
  const text = (ip: string) =>
    `GET ${PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-For: ${ip}\r\n\r\n`;
  if (shape === "returning") {
    const texts = Array.from({ length: POPULATION }, (_, i) =>
      text(`10.8.${Math.floor(i / 250)}.${(i % 250) + 1}`),
    );
    return (index) => texts[index % POPULATION] as string;
  }
  if (shape === "new") {
    let sequence = 0; // never repeats within a run: one generator per shape
    return () => {
      sequence++;
      return text(`172.${16 + ((sequence >> 16) & 15)}.${(sequence >> 8) & 255}.${sequence & 255}`);
    };
  }
  const flood = text("203.0.113.67");
  return () => flood;
}

// ---- rounds and figures -----------------------------------------------------------------------

interface Case<Result> {
  readonly label: string;
  readonly run: () => Result | Promise<Result>;
}

/** Runs every case once per round, in order then reversed; each label's results by round. */
async function interleaved<Result>(cases: readonly Case<Result>[]) {
  const results = new Map<string, Result[]>(cases.map(({ label }) => [label, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const { label, run } of round % 2 === 0 ? cases : [...cases].reverse()) {
      results.get(label)?.push(await run());
    }
  }
  return (label: string): Result[] => results.get(label) ?? [];
}

/** The median over paired rounds of `figure(a) - figure(b)`, or of `/` with `ratio`. */
function paired<Run>(a: Run[], b: Run[], figure: (run: Run) => number, ratio = false): number {
  return median(
    a.map((run, i) =>
      ratio ? figure(run) / figure(b[i] as Run) : figure(run) - figure(b[i] as Run),
    ),
  );
}

const signed = (value: number, digits: number) =>
  `${value >= 0 ? "+" : ""}${value.toFixed(digits)}`;
const pct = (ratio: number) => `${signed((ratio - 1) * 100, 1)}%`;
const ms = (value: number) => `${value.toFixed(2)} ms`;

async function main(): Promise<void> {
  execFileSync("npm", ["run", "build"], { stdio: "ignore" });
  const upstream = await startUpstream();
  const noLimit = await startGateway("no-limit", upstream, ["--no-limit"]);
  const limited = new Map<Shape, Target>();
  for (const shape of SHAPES) {
    limited.set(shape, await startGateway(`edgelimit ${shape}`, upstream, []));
  }
  const before = new Map<Shape, Target>();
  if (BEFORE !== undefined) {
    for (const shape of SHAPES) {
      before.set(shape, await startGateway(`before ${shape}`, upstream, [], BEFORE));
    }
  }
  const nginx = await startNginx(upstream);
  const first = SHAPES[0] ?? "returning";
  const gateway = (on: boolean, shape: Shape) => (on ? (limited.get(shape) as Target) : noLimit);

  const saturation: Case<Saturated>[] = [];
  const saturate = (label: string, target: Target, shape: Shape) => {
    wrk(target, shape, WARMUP_SECONDS); // JIT, the upstream pools, the first counters
    saturation.push({ label, run: () => wrk(target, shape, WRK_SECONDS) });
  };
  saturate("direct", upstream, first);
  for (const shape of SHAPES) {
    saturate(`no-limit ${shape}`, noLimit, shape);
    saturate(`edgelimit ${shape}`, gateway(true, shape), shape);
    const earlier = before.get(shape);
    if (earlier !== undefined) saturate(`before ${shape}`, earlier, shape);
  }
  saturate(`nginx limit_req ${first}`, nginx, first);
  const saturated = await interleaved(saturation);

  const generators = new Map(SHAPES.map((shape) => [shape, requestText(shape)]));
  const rates: Case<OpenLoopResult>[] = [];
  for (const rate of RATES) {
    for (const shape of SHAPES.filter((candidate) => candidate !== "refused")) {
      for (const on of [false, true]) {
        const request = generators.get(shape) as (index: number) => string;
        const port = gateway(on, shape).port;
        const options = { port, rate, seconds: RATE_SECONDS, connections: OPEN_LOOP_CONNECTIONS };
        rates.push({
          label: `${on ? "edgelimit" : "no-limit"} ${shape} @${rate}`,
          run: () => openLoop({ ...options, request }),
        });
      }
    }
  }
  const fixed = await interleaved(rates);
  report(saturation, saturated, fixed, first);
}

function report(
  saturation: readonly Case<Saturated>[],
  saturated: (label: string) => Saturated[],
  fixed: (label: string) => OpenLoopResult[],
  first: Shape,
): void {
  const out = (line: string) => process.stdout.write(`${line}\n`);
  const med = <Run>(runs: Run[], figure: (run: Run) => number) => median(runs.map(figure));
  const cpu = (run: Saturated) => run.cpuMicros;
  const rps = (run: Saturated) => run.requestsPerSecond;
  out(`saturation, medians of ${ROUNDS} rounds: serving process CPU per request, wrk req/s, p99`);
  for (const { label } of saturation) {
    const runs = saturated(label);
    const figures = [
      `${med(runs, cpu).toFixed(1).padStart(6)} µs/req`,
      `${med(runs, rps).toFixed(0).padStart(6)} req/s`,
      `p99 ${ms(med(runs, (run) => run.p99Ms))}`,
      `refused ${med(runs, (run) => run.refusedShare).toFixed(3)}`,
      `(µs/req by round: ${runs.map((run) => run.cpuMicros.toFixed(1)).join(", ")})`,
    ];
    out(`  ${label.padEnd(26)} ${figures.join("  ")}`);
  }
  out("");
  out("limiting against the same proxy with the limiter off (edgelimit vs no-limit, by round):");
  for (const shape of SHAPES) {
    const on = saturated(`edgelimit ${shape}`);
    const off = saturated(`no-limit ${shape}`);
    out(
      `  ${shape.padEnd(10)} CPU per request ${pct(paired(on, off, cpu, true))} (${signed(paired(on, off, cpu), 1)} µs), wrk req/s ${pct(paired(on, off, rps, true))}`,
    );
    for (const rate of RATES) {
      const fixedOn = fixed(`edgelimit ${shape} @${rate}`);
      const fixedOff = fixed(`no-limit ${shape} @${rate}`);
      if (fixedOn.length === 0) continue;
      const p99 = (run: OpenLoopResult) => run.p99Ms;
      const p50 = (run: OpenLoopResult) => run.p50Ms;
      out(
        `    at ${rate} req/s: p99 ${ms(med(fixedOn, p99))} vs ${ms(med(fixedOff, p99))} (${signed(paired(fixedOn, fixedOff, p99), 2)} ms by round), p50 ${ms(med(fixedOn, p50))} vs ${ms(med(fixedOff, p50))}`,
      );
    }
  }
  if (BEFORE !== undefined) {
    out("");
    out(`this tree against the tree before (${BEFORE}), by round:`);
    for (const shape of SHAPES) {
      const now = saturated(`edgelimit ${shape}`);
      const then = saturated(`before ${shape}`);
      out(
        `  ${shape.padEnd(10)} CPU per request ${pct(paired(now, then, cpu, true))} (${signed(paired(now, then, cpu), 1)} µs), wrk req/s ${pct(paired(now, then, rps, true))}`,
      );
    }
  }
  const ours = saturated(`edgelimit ${first}`);
  const nginx = saturated(`nginx limit_req ${first}`);
  out("");
  out(
    `edgelimit (${first}) against nginx limit_req: ${paired(ours, nginx, cpu, true).toFixed(2)}x nginx's CPU per request, ${paired(ours, nginx, rps, true).toFixed(2)}x its wrk req/s`,
  );
  const load = readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
  out(
    `machine: ${cpus().length} cpus, ${cpus()[0]?.model ?? "?"}, node ${process.version}; wrk -t1 -c${CONNECTIONS} -d${WRK_SECONDS}s after ${WARMUP_SECONDS} s warm-up per target; fixed rates ${RATES.join(", ")} req/s for ${RATE_SECONDS} s on ${OPEN_LOOP_CONNECTIONS} connections; ${ROUNDS} interleaved rounds; load average at the end ${load}`,
  );
}

main()
  .catch((error: unknown) => {
    process.stderr.write(`gateway bench failed: ${error instanceof Error ? error.stack : error}\n`);
    process.exitCode = 1;
  })
  .finally(async () => {
    await stopServers();
    rmSync(dir, { recursive: true, force: true });
  });
