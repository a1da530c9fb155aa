/**
 * `npx tsx bench/gateway.bench.ts` (or `npm run bench -- gateway`): the gateway's cost on
 * loopback, in one run, against its peers:
 *   direct       the upstream alone (the ceiling)
 *   no-limit     `edgelimit serve --no-limit` (the same proxy, limiter off)
 *   edgelimit    `edgelimit serve` with the memory store and examples/policies/cloudfront.yaml
 *   nginx        Debian's nginx, limit_req per client, proxying to the same upstream
 *   edgelimit-blocked  one client far over its limit: every answer is a 429 from the gateway
 * Load comes from wrk with a Lua script that gives each request a random client address in
 * X-Forwarded-For (the policy trusts it from loopback), so most requests are counted and
 * allowed, as in real traffic from many clients. Each process is single-threaded (nginx: one
 * worker) so the comparison is per core.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";

const DURATION_SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONNECTIONS = 32;
const dir = mkdtempSync(join(tmpdir(), "edgelimit-gw-bench-"));
const children: ChildProcess[] = [];

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

function start(
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
): ChildProcess {
  const child = spawn(command, args, { stdio: ["ignore", "ignore", "inherit"], env });
  children.push(child);
  return child;
}

async function waitForPort(port: number): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      const response = await fetch(`http://127.0.0.1:${port}/ready`);
      await response.arrayBuffer();
      return;
    } catch {
      if (Date.now() > deadline) throw new Error(`nothing answered on port ${port}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

interface Result {
  readonly name: string;
  readonly requestsPerSecond: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly statuses: string;
}

/** The median of each figure over rounds. */
function medianResult(rounds: readonly Result[]): Result {
  const median = (values: number[]) =>
    [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;
  const first = rounds[0] as Result;
  return {
    name: first.name,
    requestsPerSecond: median(rounds.map((run) => run.requestsPerSecond)),
    p50Ms: median(rounds.map((run) => run.p50Ms)),
    p99Ms: median(rounds.map((run) => run.p99Ms)),
    statuses: first.statuses,
  };
}

function toMs(text: string): number {
  const match = /^([\d.]+)(us|ms|s)$/.exec(text.trim());
  if (match === null) return Number.NaN;
  const value = Number(match[1]);
  return match[2] === "us" ? value / 1000 : match[2] === "s" ? value * 1000 : value;
}

function wrk(name: string, url: string, script: string, seconds = DURATION_SECONDS): Result {
  const output = execFileSync(
    "wrk",
    ["-t1", `-c${CONNECTIONS}`, `-d${seconds}s`, "--latency", "-s", script, url],
    { encoding: "utf8" },
  );
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(output)?.[1]);
  const p50 = toMs(/\s50%\s+(\S+)/.exec(output)?.[1] ?? "");
  const p99 = toMs(/\s99%\s+(\S+)/.exec(output)?.[1] ?? "");
  const non2xx = /Non-2xx or 3xx responses:\s+(\d+)/.exec(output)?.[1] ?? "0";
  const statuses = `refused ${non2xx}`;
  return { name, requestsPerSecond: rps, p50Ms: p50, p99Ms: p99, statuses };
}

const SPREAD_SCRIPT = `
math.randomseed(42)
request = function()
  local ip = "10." .. math.random(0, 255) .. "." .. math.random(0, 255) .. "." .. math.random(1, 254)
  return wrk.format("GET", "/api/search?q=shoes", { ["X-Forwarded-For"] = ip })
end
`;
// A population of 10,000 clients that come back, as real traffic within a minute does: each
// client is counted many times, so the store mostly updates counters instead of creating them.
const POPULATION_SCRIPT = `
math.randomseed(7)
request = function()
  local ip = "10.9." .. math.random(0, 39) .. "." .. math.random(1, 250)
  return wrk.format("GET", "/api/search?q=shoes", { ["X-Forwarded-For"] = ip })
end
`;
const FLOOD_SCRIPT = `
request = function()
  return wrk.format("GET", "/api/search?q=shoes", { ["X-Forwarded-For"] = "203.0.113.66" })
end
`;

async function main(): Promise<void> {
  const spreadScript = join(dir, "spread.lua");
  const floodScript = join(dir, "flood.lua");
  writeFileSync(spreadScript, SPREAD_SCRIPT);
  writeFileSync(floodScript, FLOOD_SCRIPT);
  const populationScript = join(dir, "population.lua");
  writeFileSync(populationScript, POPULATION_SCRIPT);

  const upstreamPort = await freePort();
  start(process.execPath, [
    "-e",
    `require("node:http").createServer((req, res) => { res.writeHead(200, { "content-type": "application/json" }); res.end('{"ok":true,"items":[1,2,3]}'); }).listen(${upstreamPort}, "127.0.0.1")`,
  ]);
  await waitForPort(upstreamPort);

  const env = {
    ...process.env,
    EDGELIMIT_JWT_SECRET: "bench-secret-not-used-by-anonymous-traffic",
  };
  const serve = async (extra: string[]): Promise<number> => {
    const port = await freePort();
    const adminPort = await freePort();
    start(
      process.execPath,
      [
        "--import",
        "tsx",
        "src/cli/main.ts",
        "serve",
        "--policy",
        "examples/policies/cloudfront.yaml",
        "--upstream",
        `http://127.0.0.1:${upstreamPort}`,
        "--port",
        String(port),
        "--host",
        "127.0.0.1",
        "--admin-port",
        String(adminPort),
        "--log-sample",
        "0",
        ...extra,
      ],
      env,
    );
    await waitForPort(port);
    return port;
  };
  const noLimitPort = await serve(["--no-limit"]);
  const limitedPort = await serve([]);
  const floodPort = await serve([]);
  const populationPort = await serve([]);

  const nginxPort = await freePort();
  for (const sub of ["body", "proxy", "fastcgi", "uwsgi", "scgi", "logs"])
    mkdirSync(join(dir, sub));
  writeFileSync(
    join(dir, "nginx.conf"),
    `daemon off;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/logs/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  # The same shape as the example policy's anonymous global rule: 60 a minute with a burst.
  limit_req_zone $http_x_forwarded_for zone=perclient:64m rate=60r/m;
  upstream origin { server 127.0.0.1:${upstreamPort}; keepalive 64; }
  server {
    listen 127.0.0.1:${nginxPort};
    location / {
      limit_req zone=perclient burst=60 nodelay;
      limit_req_status 429;
      proxy_pass http://origin;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
    }
  }
}
`,
  );
  start("/usr/sbin/nginx", [
    "-p",
    dir,
    "-c",
    join(dir, "nginx.conf"),
    "-e",
    join(dir, "logs/error.log"),
  ]);
  await waitForPort(nginxPort);

  const targets: [string, number, string][] = [
    ["direct", upstreamPort, spreadScript],
    ["no-limit", noLimitPort, spreadScript],
    ["edgelimit", limitedPort, spreadScript],
    ["nginx", nginxPort, spreadScript],
    ["edgelimit-blocked", floodPort, floodScript],
    ["no-limit-10k", noLimitPort, populationScript],
    ["edgelimit-10k", populationPort, populationScript],
  ];
  // Warm up every target (JIT, pools) before measuring.
  for (const [name, port, script] of targets) wrk(name, `http://127.0.0.1:${port}`, script, 2);
  // Rounds interleave the targets, so that a burst of load from elsewhere on this shared machine
  // hits every target alike; each figure is the median over the rounds.
  const runs = new Map<string, Result[]>();
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, port, script] of targets) {
      const result = wrk(name, `http://127.0.0.1:${port}`, script);
      runs.set(name, [...(runs.get(name) ?? []), result]);
    }
  }
  const results: Result[] = targets.map(([name]) => medianResult(runs.get(name) ?? []));
  for (const result of results) {
    process.stdout.write(
      `${result.name.padEnd(18)} ${result.requestsPerSecond.toFixed(0).padStart(7)} req/s  p50 ${result.p50Ms.toFixed(2)} ms  p99 ${result.p99Ms.toFixed(2)} ms  ${result.statuses}  (rounds: ${(runs.get(result.name) ?? []).map((run) => run.requestsPerSecond.toFixed(0)).join(", ")} req/s)\n`,
    );
  }
  const by = (name: string) => results.find((result) => result.name === name) as Result;
  const limited = by("edgelimit");
  const baseline = by("no-limit");
  const nginx = by("nginx");
  const throughputCost = 1 - limited.requestsPerSecond / baseline.requestsPerSecond;
  const p99Cost = limited.p99Ms - baseline.p99Ms;
  const returning = by("edgelimit-10k");
  const returningBaseline = by("no-limit-10k");
  const returningCost = 1 - returning.requestsPerSecond / returningBaseline.requestsPerSecond;
  process.stdout.write(
    [
      "",
      `limiting cost, every request a new client: ${(throughputCost * 100).toFixed(1)}% throughput (target <= 10%), ${p99Cost.toFixed(2)} ms p99 (target <= 1 ms)`,
      `limiting cost, 10,000 returning clients: ${(returningCost * 100).toFixed(1)}% throughput, ${(returning.p99Ms - returningBaseline.p99Ms).toFixed(2)} ms p99`,
      `edgelimit / nginx limit_req: ${(limited.requestsPerSecond / nginx.requestsPerSecond).toFixed(2)}x throughput, p99 ${limited.p99Ms.toFixed(2)} vs ${nginx.p99Ms.toFixed(2)} ms`,
      `machine: ${cpus().length} cpus, ${cpus()[0]?.model ?? "?"}, node ${process.version}, wrk -t1 -c${CONNECTIONS} -d${DURATION_SECONDS}s, ${ROUNDS} interleaved rounds, medians`,
      `load average at the end: ${readFileSync("/proc/loadavg", "utf8").trim()}`,
      "",
    ].join("\n"),
  );
}

async function stopAll(): Promise<void> {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      await new Promise((resolve) => {
        const timer = setTimeout(() => {
          child.kill("SIGKILL");
          resolve(undefined);
        }, 12_000);
        child.once("exit", () => {
          clearTimeout(timer);
          resolve(undefined);
        });
      });
    }
  }
  rmSync(dir, { recursive: true, force: true });
}

main()
  .catch((error: unknown) => {
    process.stderr.write(
      `gateway bench failed: ${error instanceof Error ? error.stack : String(error)}\n`,
    );
    process.exitCode = 1;
  })
  .finally(() => stopAll());
