/**
 * `npx tsx bench/gateway.bench.ts` (or `npm run bench -- gateway`): what limiting costs the
 * gateway, on loopback, in one run.
 *
 * On a small shared machine wrk, the upstream and the gateway compete for the same cores, so
 * req/s swings by more than the 10% being measured. Two measurements that do not depend on the
 * scheduler are therefore primary:
 *   - CPU time per request: the gateway process's utime + stime (/proc/<pid>/stat) across a
 *     saturating wrk run, divided by the requests wrk completed. When the gateway is the
 *     bottleneck its throughput is 1 / (CPU per request), so the ratio of CPU per request with
 *     limiting on and off is the throughput cost, without the scheduler's noise.
 *   - p99 latency at a fixed request rate well below saturation (an open-loop generator in this
 *     process). At saturation p99 is queueing (connections / throughput) and only restates
 *     throughput; it is printed too, beside wrk's req/s.
 * Targets, all proxying to the same single-process Node upstream:
 *   direct       the upstream alone (the ceiling)
 *   no-limit     `edgelimit serve --no-limit` (the same proxy, limiter off)
 *   headers-only the same proxy from a patched copy of the build that adds the limited gateway's
 *                headers (five to the client, one to the origin) and asks no limiter: what the
 *                headers SPEC requires cost on their own (returning shape, built entry only)
 *   edgelimit    `edgelimit serve`, memory store, examples/policies/cloudfront.yaml, one
 *                process per traffic shape so that shapes do not share counters
 *   nginx        Debian's nginx (one process, `master_process off`), limit_req per client
 * Traffic shapes (client address in X-Forwarded-For, which the policy trusts from loopback):
 *   returning    10,000 clients cycling (each counted many times: counters mostly updated)
 *   new          a new client per request (worst case: two memory-store inserts per request)
 *   refused      one client far over its limit: every answer is the gateway's own 429
 * Rounds interleave the targets (reversed every other round) and figures are medians.
 * Placement: the scheduler places every process (as in every session's figures). With
 * GATEWAY_BENCH_PIN=1 on a machine with two or more CPUs, the serving processes (the gateways,
 * nginx) run on CPU 0 and everything else (wrk, the upstream, this process's open-loop
 * generator) on CPU 1, as a gateway runs in production: on a core of its own, not time-sliced
 * with the load generator and the origin. The report says which was used.
 * Knobs: GATEWAY_BENCH_SECONDS (wrk run, default 2), GATEWAY_BENCH_ROUNDS (default 5),
 * GATEWAY_BENCH_BODY_BYTES (the upstream's JSON answer, default its smallest: 27 bytes),
 * GATEWAY_BENCH_WARMUP_SECONDS (wrk per target before the rounds, default 2; when set, returning
 * clients warm up from a population of their own, 10.7.x.y, so that a long warm-up does not
 * bring the measured clients near their limits),
 * GATEWAY_BENCH_RATES (fixed rates in req/s, default "1000,3000"), GATEWAY_BENCH_RATE_SECONDS
 * (default 2), GATEWAY_BENCH_CONNECTIONS (wrk, default 32), GATEWAY_BENCH_SHAPES (default
 * "returning,new,refused"), GATEWAY_BENCH_ENTRY (the CLI file to run; default `dist/cli/main.js`,
 * built first with `npm run build`, as users run it; `src` through tsx with
 * GATEWAY_BENCH_ENTRY=tsx), GATEWAY_BENCH_PIN (1: pin, above).
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { connect, createServer, type Socket } from "node:net";
import { cpus, tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { performance } from "node:perf_hooks";

const env = process.env;
const WRK_SECONDS = Number(env.GATEWAY_BENCH_SECONDS ?? env.BENCH_SECONDS ?? 2);
const WARMUP_SECONDS = Number(env.GATEWAY_BENCH_WARMUP_SECONDS ?? 2);
const ROUNDS = Number(env.GATEWAY_BENCH_ROUNDS ?? env.BENCH_ROUNDS ?? 5);
const RATES = (env.GATEWAY_BENCH_RATES ?? "1000,3000")
  .split(",")
  .map(Number)
  .filter((rate) => rate > 0);
const RATE_SECONDS = Number(env.GATEWAY_BENCH_RATE_SECONDS ?? 2);
const CONNECTIONS = Number(env.GATEWAY_BENCH_CONNECTIONS ?? 32);
const OPEN_LOOP_CONNECTIONS = 64;
const CLOCK_TICKS_PER_SECOND = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }));
type Shape = "returning" | "new" | "refused";
const SHAPES = (env.GATEWAY_BENCH_SHAPES ?? "returning,new,refused")
  .split(",")
  .filter((shape): shape is Shape => ["returning", "new", "refused"].includes(shape));
/** How the gateway is started: from source through tsx, or a built file (`dist/cli/main.js`). */
const ENTRY =
  env.GATEWAY_BENCH_ENTRY === "tsx"
    ? ["--import", "tsx", "src/cli/main.ts"]
    : [env.GATEWAY_BENCH_ENTRY || "dist/cli/main.js"];
/** CPUs for the serving processes and for the rest (see the header), or none: no pinning. */
const PIN =
  env.GATEWAY_BENCH_PIN === "1" && cpus().length >= 2
    ? { served: ["taskset", "-c", "0"], rest: ["taskset", "-c", "1"] }
    : undefined;
const POPULATION = 10_000;
const PATH = "/api/search?q=shoes";

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
  childEnv: NodeJS.ProcessEnv = env,
  cpu: readonly string[] | undefined = undefined,
): ChildProcess {
  const argv = cpu === undefined ? [command, ...args] : [...cpu, command, ...args];
  const child = spawn(argv[0] as string, argv.slice(1), {
    stdio: ["ignore", "ignore", "inherit"],
    env: childEnv,
  });
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

/** utime + stime of a process, in seconds. */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // The command name may hold spaces: the fields are counted after its closing parenthesis.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

/** The median over paired rounds of `figure(on) / figure(off) - 1`: +0.1 is 10% more. */
function pairedChange<Run>(
  on: readonly Run[],
  off: readonly Run[],
  figure: (run: Run) => number,
): number {
  return median(on.map((run, i) => figure(run) / figure(off[i] as Run) - 1));
}

function toMs(text: string): number {
  const match = /^([\d.]+)(us|ms|s)$/.exec(text.trim());
  if (match === null) return Number.NaN;
  const value = Number(match[1]);
  return match[2] === "us" ? value / 1000 : match[2] === "s" ? value * 1000 : value;
}

interface Saturated {
  readonly requestsPerSecond: number;
  readonly p99Ms: number;
  readonly requests: number;
  readonly refused: number;
  /** The serving process's CPU per completed request, in µs. */
  readonly cpuMicros: number;
}

function wrk(port: number, script: string, pid: number, seconds = WRK_SECONDS): Saturated {
  const before = cpuSeconds(pid);
  const output = execFileSync(
    PIN === undefined ? "wrk" : (PIN.rest[0] as string),
    [
      ...(PIN === undefined ? [] : [...PIN.rest.slice(1), "wrk"]),
      "-t1",
      `-c${CONNECTIONS}`,
      `-d${seconds}s`,
      "--latency",
      "-s",
      script,
      `http://127.0.0.1:${port}`,
    ],
    { encoding: "utf8" },
  );
  const cpu = cpuSeconds(pid) - before;
  const requests = Number(/(\d+) requests in/.exec(output)?.[1]);
  return {
    requestsPerSecond: Number(/Requests\/sec:\s+([\d.]+)/.exec(output)?.[1]),
    p99Ms: toMs(/\s99%\s+(\S+)/.exec(output)?.[1] ?? ""),
    requests,
    refused: Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(output)?.[1] ?? 0),
    cpuMicros: (cpu / requests) * 1e6,
  };
}

interface FixedRate {
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly completed: number;
  readonly refused: number;
  readonly cpuMicros: number;
}

/**
 * Open loop: requests are due at a fixed rate whatever the server's pace, on a pool of
 * keep-alive connections (one request in flight on each). Latency runs from the moment a
 * request was found due (so a request that waits for a free connection counts its wait) to
 * the end of its response.
 */
async function openLoop(
  port: number,
  rate: number,
  seconds: number,
  requestText: (index: number) => string,
  pid: number,
): Promise<FixedRate> {
  interface Connection {
    readonly socket: Socket;
    sentAt: number;
    pending: Buffer;
  }
  const total = Math.round(rate * seconds);
  const latencies: number[] = [];
  let refused = 0;
  let issued = 0;
  const idle: Connection[] = [];
  const backlog: number[] = [];
  let finish: () => void = () => undefined;
  const finished = new Promise<void>((resolve) => {
    finish = resolve;
  });
  const send = (connection: Connection, since: number) => {
    connection.sentAt = since;
    connection.socket.write(requestText(issued));
    issued++;
  };
  const onResponse = (connection: Connection, status: number) => {
    latencies.push(performance.now() - connection.sentAt);
    if (status >= 300) refused++;
    if (latencies.length === total) finish();
    const waiting = backlog.shift();
    if (waiting !== undefined) send(connection, waiting);
    else idle.push(connection);
  };
  const connections = await Promise.all(
    Array.from(
      { length: OPEN_LOOP_CONNECTIONS },
      () =>
        new Promise<Connection>((resolve, reject) => {
          const socket = connect(port, "127.0.0.1", () => resolve(connection));
          socket.setNoDelay(true);
          const connection: Connection = { socket, sentAt: 0, pending: Buffer.alloc(0) };
          socket.on("error", reject);
          socket.on("data", (chunk: Buffer) => {
            connection.pending =
              connection.pending.length === 0 ? chunk : Buffer.concat([connection.pending, chunk]);
            for (;;) {
              const end = responseEnd(connection.pending);
              if (end === undefined) return;
              const status = Number(connection.pending.toString("latin1", 9, 12));
              connection.pending = connection.pending.subarray(end);
              onResponse(connection, status);
            }
          });
        }),
    ),
  );
  idle.push(...connections);
  const cpuBefore = cpuSeconds(pid);
  const startedAt = performance.now();
  let due = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    const dueNow = Math.min(total, Math.floor(((now - startedAt) * rate) / 1000));
    for (; due < dueNow; due++) {
      const connection = idle.pop();
      if (connection !== undefined) send(connection, now);
      else backlog.push(now);
    }
    if (due === total) clearInterval(timer);
  }, 1);
  const deadline = setTimeout(finish, seconds * 1000 + 10_000);
  await finished;
  clearTimeout(deadline);
  clearInterval(timer);
  const cpu = cpuSeconds(pid) - cpuBefore;
  for (const connection of connections) connection.socket.destroy();
  latencies.sort((a, b) => a - b);
  const at = (share: number) =>
    latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * share))] ?? Number.NaN;
  return {
    p50Ms: at(0.5),
    p99Ms: at(0.99),
    completed: latencies.length,
    refused,
    cpuMicros: (cpu / Math.max(1, latencies.length)) * 1e6,
  };
}

const HEADER_END = Buffer.from("\r\n\r\n");

/** Where the first complete response in `buffer` ends, or undefined while it is incomplete. */
function responseEnd(buffer: Buffer): number | undefined {
  const headerEnd = buffer.indexOf(HEADER_END);
  if (headerEnd < 0) return undefined;
  const head = buffer.toString("latin1", 0, headerEnd).toLowerCase();
  const length = /\r\ncontent-length:\s*(\d+)/.exec(head);
  if (length !== null) {
    const end = headerEnd + 4 + Number(length[1]);
    return buffer.length >= end ? end : undefined;
  }
  if (head.includes("\r\ntransfer-encoding: chunked")) {
    const last = buffer.indexOf("0\r\n\r\n", headerEnd + 4);
    return last < 0 ? undefined : last + 5;
  }
  return headerEnd + 4;
}

const WRK_SCRIPTS: Record<Shape, string> = {
  // Cycles through the population in order: every client comes back every 10,000 requests.
  returning: `
local n = 0
request = function()
  n = n + 1
  local i = n % ${POPULATION}
  local ip = "10.9." .. math.floor(i / 250) .. "." .. (i % 250 + 1)
  return wrk.format("GET", "${PATH}", { ["X-Forwarded-For"] = ip })
end
`,
  new: `
math.randomseed(42)
request = function()
  local ip = "10." .. math.random(0, 255) .. "." .. math.random(0, 255) .. "." .. math.random(1, 254)
  return wrk.format("GET", "${PATH}", { ["X-Forwarded-For"] = ip })
end
`,
  refused: `
request = function()
  return wrk.format("GET", "${PATH}", { ["X-Forwarded-For"] = "203.0.113.66" })
end
`,
};

function openLoopRequests(shape: Shape): (index: number) => string {
  const text = (ip: string) =>
    `GET ${PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-For: ${ip}\r\n\r\n`;
  if (shape === "returning") {
    const prebuilt = Array.from({ length: POPULATION }, (_, i) =>
      text(`10.8.${Math.floor(i / 250)}.${(i % 250) + 1}`),
    );
    return (index) => prebuilt[index % POPULATION] as string;
  }
  if (shape === "new") {
    // Never repeats within a run (the generator is built once per shape).
    let sequence = 0;
    return () => {
      sequence++;
      return text(`172.${16 + ((sequence >> 16) & 15)}.${(sequence >> 8) & 255}.${sequence & 255}`);
    };
  }
  const flood = text("203.0.113.67");
  return () => flood;
}

/** Bytes of the upstream's JSON answer (GATEWAY_BENCH_BODY_BYTES); default the smallest, 27 bytes. */
const BODY_BYTES = Number(env.GATEWAY_BENCH_BODY_BYTES ?? 0);
const UPSTREAM_SOURCE = (port: number) =>
  `const body = ${JSON.stringify(upstreamBody(BODY_BYTES))}; require("node:http").createServer((req, res) => { res.writeHead(200, { "content-type": "application/json" }); res.end(body); }).listen(${port}, "127.0.0.1")`;

/** A JSON answer of `bytes` bytes (at least the smallest one, 27 bytes). */
function upstreamBody(bytes: number): string {
  const smallest = '{"ok":true,"items":[1,2,3]}';
  if (bytes <= smallest.length) return smallest;
  return JSON.stringify({ ok: true, items: "x".repeat(bytes - '{"ok":true,"items":""}'.length) });
}

function nginxConfig(port: number, upstreamPort: number): string {
  return `daemon off;
master_process off;
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
    listen 127.0.0.1:${port};
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
`;
}

interface Target {
  readonly name: string;
  readonly port: number;
  readonly pid: number;
}

async function main(): Promise<void> {
  // The gateway as users run it: the built CLI, rebuilt so that it matches the source.
  if (env.GATEWAY_BENCH_ENTRY === undefined || env.GATEWAY_BENCH_ENTRY === "") {
    execFileSync("npm", ["run", "build"], { stdio: "ignore" });
  }
  const upstreamPort = await freePort();
  // This process sends the fixed-rate requests: on the load generator's CPU.
  if (PIN !== undefined) {
    execFileSync(PIN.rest[0] as string, ["-a", "-p", ...PIN.rest.slice(1), String(process.pid)], {
      stdio: "ignore",
    });
  }
  const upstream = start(process.execPath, ["-e", UPSTREAM_SOURCE(upstreamPort)], env, PIN?.rest);
  await waitForPort(upstreamPort);

  const serveEnv = {
    ...env,
    EDGELIMIT_JWT_SECRET: "bench-secret-not-used-by-anonymous-traffic",
    EDGELIMIT_CHALLENGE_SECRET: "bench-challenge-secret-not-used",
  };
  const serve = async (
    name: string,
    extra: string[],
    policy = "examples/policies/cloudfront.yaml",
    entry = ENTRY,
  ): Promise<Target> => {
    const port = await freePort();
    const adminPort = await freePort();
    const child = start(
      process.execPath,
      [
        ...entry,
        "serve",
        "--policy",
        policy,
        "--upstream",
        `http://127.0.0.1:${upstreamPort}`,
        "--port",
        String(port),
        "--host",
        "127.0.0.1",
        "--admin-port",
        String(adminPort),
        ...extra,
      ],
      serveEnv,
      PIN?.served,
    );
    await waitForPort(port);
    return { name, port, pid: child.pid as number };
  };
  const direct: Target = { name: "direct", port: upstreamPort, pid: upstream.pid as number };
  const noLimit = await serve("no-limit", ["--no-limit"]);
  // One limited gateway per shape: the shapes must not share counters.
  const limited = new Map<Shape, Target>();
  for (const shape of SHAPES) limited.set(shape, await serve(`edgelimit-${shape}`, []));
  // The same policy without the five rate-limit response headers: what the headers cost.
  const headerless = join(dir, "no-headers.yaml");
  writeFileSync(
    headerless,
    `${readFileSync("examples/policies/cloudfront.yaml", "utf8")}\nheaders: { legacy: false, draft: false }\n`,
  );
  const noHeaders = SHAPES.includes("returning")
    ? await serve("edgelimit-no-headers", [], headerless)
    : undefined;
  // The proxy with the limited gateway's headers and no decision, from a copy of the build
  // (bench/patch-headers-only.mjs, as in bench/gateway-instructions.sh): what limiting costs
  // beyond the headers that SPEC requires. Only for a built entry (not tsx).
  let headersOnly: Target | undefined;
  if (SHAPES.includes("returning") && env.GATEWAY_BENCH_ENTRY !== "tsx") {
    const entry = ENTRY[0] as string;
    const build = join(dir, "headers-only");
    cpSync(dirname(dirname(entry)), build, { recursive: true });
    // The copy finds its packages (undici, pino, ...) through this link.
    symlinkSync(resolve("node_modules"), join(dir, "node_modules"));
    execFileSync(process.execPath, ["bench/patch-headers-only.mjs", build], { stdio: "inherit" });
    headersOnly = await serve("headers-only", ["--no-limit"], undefined, [
      join(build, "cli", "main.js"),
    ]);
  }

  const nginxPort = await freePort();
  for (const sub of ["body", "proxy", "fastcgi", "uwsgi", "scgi", "logs"])
    mkdirSync(join(dir, sub));
  writeFileSync(join(dir, "nginx.conf"), nginxConfig(nginxPort, upstreamPort));
  const nginxProcess = start(
    "/usr/sbin/nginx",
    ["-p", dir, "-c", join(dir, "nginx.conf"), "-e", join(dir, "logs/error.log")],
    env,
    PIN?.served,
  );
  await waitForPort(nginxPort);
  const nginx: Target = { name: "nginx", port: nginxPort, pid: nginxProcess.pid as number };

  const scripts = new Map<Shape, string>();
  for (const shape of SHAPES) {
    const file = join(dir, `${shape}.lua`);
    writeFileSync(file, WRK_SCRIPTS[shape]);
    scripts.set(shape, file);
  }

  // Saturation: wrk against every (target, shape) pair, interleaved.
  const saturationPairs: [string, Target, Shape][] = [];
  const firstShape = SHAPES[0] ?? "returning";
  saturationPairs.push(["direct", direct, firstShape]);
  for (const shape of SHAPES) {
    saturationPairs.push([`no-limit ${shape}`, noLimit, shape]);
    if (shape === "returning" && headersOnly !== undefined) {
      saturationPairs.push(["headers-only returning (no decision)", headersOnly, shape]);
    }
    saturationPairs.push([`edgelimit ${shape}`, limited.get(shape) as Target, shape]);
    if (shape === "returning" && noHeaders !== undefined) {
      saturationPairs.push(["edgelimit returning, no rate-limit headers", noHeaders, shape]);
    }
  }
  saturationPairs.push(["nginx", nginx, firstShape]);
  // Warm-up: JIT, upstream pools, and the open-loop client's connections.
  const warmupScripts = new Map(scripts);
  if (env.GATEWAY_BENCH_WARMUP_SECONDS !== undefined && SHAPES.includes("returning")) {
    const file = join(dir, "returning-warmup.lua");
    writeFileSync(file, WRK_SCRIPTS.returning.replace('"10.9."', '"10.7."'));
    warmupScripts.set("returning", file);
  }
  for (const [, target, shape] of saturationPairs)
    wrk(target.port, warmupScripts.get(shape) as string, target.pid, WARMUP_SECONDS);
  const saturated = new Map<string, Saturated[]>();
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? saturationPairs : [...saturationPairs].reverse();
    for (const [label, target, shape] of order) {
      const result = wrk(target.port, scripts.get(shape) as string, target.pid);
      saturated.set(label, [...(saturated.get(label) ?? []), result]);
    }
  }

  // Fixed rates: limiting on and off at the same rate and shape, interleaved.
  const ratePairs: [string, Target, Shape, number][] = [];
  for (const rate of RATES) {
    for (const shape of SHAPES.filter((candidate) => candidate !== "refused")) {
      ratePairs.push([`no-limit ${shape} @${rate}`, noLimit, shape, rate]);
      ratePairs.push([`edgelimit ${shape} @${rate}`, limited.get(shape) as Target, shape, rate]);
    }
  }
  const generators = new Map(SHAPES.map((shape) => [shape, openLoopRequests(shape)]));
  const fixed = new Map<string, FixedRate[]>();
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? ratePairs : [...ratePairs].reverse();
    for (const [label, target, shape, rate] of order) {
      const result = await openLoop(
        target.port,
        rate,
        RATE_SECONDS,
        generators.get(shape) as (index: number) => string,
        target.pid,
      );
      fixed.set(label, [...(fixed.get(label) ?? []), result]);
    }
  }

  const lines: string[] = [];
  const out = (line: string) => lines.push(line);
  const f0 = (value: number) => value.toFixed(0);
  const f1 = (value: number) => value.toFixed(1);
  const f2 = (value: number) => value.toFixed(2);
  const pct = (value: number) => `${value >= 0 ? "+" : ""}${(value * 100).toFixed(1)}%`;
  out("saturation (wrk): CPU µs per request of the serving process, req/s, p99; medians");
  for (const [label] of saturationPairs) {
    const runs = saturated.get(label) ?? [];
    out(
      `  ${label.padEnd(42)} ${f1(median(runs.map((run) => run.cpuMicros))).padStart(6)} µs/req  ${f0(median(runs.map((run) => run.requestsPerSecond))).padStart(6)} req/s  p99 ${f2(median(runs.map((run) => run.p99Ms)))} ms  refused ${median(runs.map((run) => run.refused / run.requests)).toFixed(3)}  (µs/req by round: ${runs.map((run) => f1(run.cpuMicros)).join(", ")}; req/s: ${runs.map((run) => f0(run.requestsPerSecond)).join(", ")})`,
    );
  }
  out("");
  out("limiting cost per shape (on vs off, paired by round, median of the rounds' ratios):");
  for (const shape of SHAPES) {
    const on = saturated.get(`edgelimit ${shape}`) ?? [];
    const off = saturated.get(`no-limit ${shape}`) ?? [];
    const cpuCost = pairedChange(on, off, (run) => run.cpuMicros);
    const rpsChange = pairedChange(on, off, (run) => run.requestsPerSecond);
    const cpuAdded = median(on.map((run, i) => run.cpuMicros - (off[i] as Saturated).cpuMicros));
    out(
      `  ${shape.padEnd(10)} CPU per request ${pct(cpuCost)} (+${f1(cpuAdded)} µs; target <= +10%), wrk req/s ${pct(rpsChange)}, saturated p99 ${f2(median(on.map((run) => run.p99Ms)))} vs ${f2(median(off.map((run) => run.p99Ms)))} ms`,
    );
    for (const rate of RATES) {
      const fixedOn = fixed.get(`edgelimit ${shape} @${rate}`);
      const fixedOff = fixed.get(`no-limit ${shape} @${rate}`);
      if (fixedOn === undefined || fixedOff === undefined) continue;
      const p99Added = median(
        fixedOn.map((run, i) => run.p99Ms - (fixedOff[i] as FixedRate).p99Ms),
      );
      // Below saturation every request costs more (fewer events per turn of the event loop),
      // so the share limiting adds here differs from the saturated one. CPU is counted in
      // clock ticks: over a 2 s run at 1,000 req/s one tick is 5 µs per request.
      const cpuShare = pairedChange(fixedOn, fixedOff, (run) => run.cpuMicros);
      out(
        `    @${rate} req/s: p99 ${f2(median(fixedOn.map((run) => run.p99Ms)))} vs ${f2(median(fixedOff.map((run) => run.p99Ms)))} ms (${p99Added >= 0 ? "+" : ""}${f2(p99Added)} ms; target <= +1 ms), p50 ${f2(median(fixedOn.map((run) => run.p50Ms)))} vs ${f2(median(fixedOff.map((run) => run.p50Ms)))} ms, CPU ${f1(median(fixedOn.map((run) => run.cpuMicros)))} vs ${f1(median(fixedOff.map((run) => run.cpuMicros)))} µs/req (${pct(cpuShare)} paired), refused ${median(fixedOn.map((run) => run.refused))} (p99 by round on: ${fixedOn.map((run) => f2(run.p99Ms)).join(", ")}; off: ${fixedOff.map((run) => f2(run.p99Ms)).join(", ")})`,
      );
    }
  }
  const headerlessRuns = saturated.get("edgelimit returning, no rate-limit headers");
  if (headerlessRuns !== undefined) {
    const off = saturated.get("no-limit returning") ?? [];
    const cost = pairedChange(headerlessRuns, off, (run) => run.cpuMicros);
    out(
      `  returning without the rate-limit response headers: CPU per request ${pct(cost)} (the rest of the returning cost is the headers)`,
    );
  }
  const headersOnlyRuns = saturated.get("headers-only returning (no decision)");
  if (headersOnlyRuns !== undefined) {
    const on = saturated.get("edgelimit returning") ?? [];
    const off = saturated.get("no-limit returning") ?? [];
    const headersCost = pairedChange(headersOnlyRuns, off, (run) => run.cpuMicros);
    const beyond = pairedChange(on, headersOnlyRuns, (run) => run.cpuMicros);
    const beyondRps = pairedChange(on, headersOnlyRuns, (run) => run.requestsPerSecond);
    out(
      `  returning, the required headers alone (headers-only vs no-limit): CPU per request ${pct(headersCost)}; limiting beyond them (edgelimit vs headers-only): CPU per request ${pct(beyond)}, wrk req/s ${pct(beyondRps)}`,
    );
  }
  const nginxRuns = saturated.get("nginx") ?? [];
  const peer = saturated.get(`edgelimit ${firstShape}`) ?? [];
  out("");
  out(
    `edgelimit (${firstShape}) / nginx limit_req: CPU per request ${f2(median(peer.map((run, i) => (nginxRuns[i] as Saturated).cpuMicros / run.cpuMicros)))}x as efficient, wrk req/s ${f2(median(peer.map((run, i) => run.requestsPerSecond / (nginxRuns[i] as Saturated).requestsPerSecond)))}x`,
  );
  out(
    `machine: ${cpus().length} cpus, ${cpus()[0]?.model ?? "?"}, node ${process.version}; wrk -t1 -c${CONNECTIONS} -d${WRK_SECONDS}s; fixed rates ${RATES.join(", ")} req/s for ${RATE_SECONDS}s on ${OPEN_LOOP_CONNECTIONS} connections; upstream answer ${upstreamBody(BODY_BYTES).length} bytes; ${WARMUP_SECONDS} s warm-up per target; ${ROUNDS} interleaved rounds; CLK_TCK ${CLOCK_TICKS_PER_SECOND}; ${PIN === undefined ? "not pinned: the scheduler placed every process (GATEWAY_BENCH_PIN=1 pins)" : "pinned: gateways and nginx on CPU 0; wrk, the upstream and the fixed-rate generator on CPU 1"}`,
  );
  out(`load average at the end: ${readFileSync("/proc/loadavg", "utf8").trim()}`);
  process.stdout.write(`${lines.join("\n")}\n`);
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
