/**
 * `npm run bench -- rls` (or `npx tsx bench/rls.bench.ts`): the rate limit service, on loopback,
 * in one run. Needs redis-server, nginx and wrk; builds the CLI first and runs
 * `dist/cli/main.js`, as users do.
 *
 * 1. gRPC decisions per second per core: `edgelimit rls --config` with a two-descriptor call
 *    (the client's address, and the address with the path, as Envoy's route sends them), 10,000
 *    returning clients, at saturation from this process (64 calls in flight on one HTTP/2
 *    connection, as Envoy multiplexes its calls).
 *    The figure is the service process's CPU (/proc/<pid>/stat) per decision, inverted: what
 *    one core of it decides per second. Memory store and Redis.
 * 2. p50/p99 at fixed rates (1,000 and 5,000 decisions/s, open loop: latency from the moment a
 *    call fell due, so a slow server shows as latency, not as a lower rate), memory and Redis.
 * 3. Redis server time per decision (`INFO commandstats`, usec, every command the service
 *    sent) of the same decisions against the reference's pattern sent by this process: one
 *    INCRBY and one EXPIRE per descriptor, pipelined, as envoyproxy/ratelimit sends them.
 * 4. CPU per request of the whole path at saturation (wrk, the same 10,000 clients): nginx with
 *    auth_request asking `edgelimit rls --policy` (nginx + rls), nginx `limit_req` alone, and
 *    `edgelimit serve`; the app behind each is the same and not counted.
 *
 * Rounds interleave the cases; figures are medians. Knobs: RLS_BENCH_SECONDS (each saturation
 * run, default 2), RLS_BENCH_ROUNDS (default 3), RLS_BENCH_RATES (default "1000,5000"),
 * RLS_BENCH_PARTS (default "1,2,3,4").
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { connect } from "node:http2";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { startRedis } from "../test/redis/redis-server.js";
import { upstreamRoot } from "../test/rls/harness.js";
import { median } from "./support/median.js";
import { limitReqHttp, startNginx } from "./support/nginx.js";
import {
  cpuSeconds,
  freePort,
  type Server,
  startServer,
  stopServers,
} from "./support/processes.js";

const SECONDS = Number(process.env.RLS_BENCH_SECONDS ?? 2);
const ROUNDS = Number(process.env.RLS_BENCH_ROUNDS ?? 3);
/** Which parts to run (default all): `RLS_BENCH_PARTS=1,3`. */
const PARTS = new Set(
  (process.env.RLS_BENCH_PARTS ?? "1,2,3,4").split(",").map(Number).filter(Boolean),
);
const RATES = (process.env.RLS_BENCH_RATES ?? "1000,5000").split(",").map(Number).filter(Boolean);
const RATE_SECONDS = 2;
const IN_FLIGHT = 64;
const POPULATION = 10_000;
const CONNECTIONS = 32;
const PATH = "/api/search";
const POLICY = "examples/policies/cloudfront.yaml";
const SECRETS = {
  EDGELIMIT_JWT_SECRET: "bench-secret-not-used-by-anonymous-traffic",
  EDGELIMIT_CHALLENGE_SECRET: "bench-challenge-secret-not-used",
};

const dir = mkdtempSync(join(tmpdir(), "edgelimit-rls-bench-"));
const out = (line: string) => process.stdout.write(`${line}\n`);

// ---- the calls ------------------------------------------------------------------------------

const CONFIG = `domain: edge
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 600 }
    descriptors:
      - key: path
        rate_limit: { unit: minute, requests_per_unit: 300 }
`;

function clientAddress(index: number): string {
  const i = index % POPULATION;
  return `10.9.${Math.floor(i / 250)}.${(i % 250) + 1}`;
}

/** Every client's call, encoded once by protobufjs from Envoy's rls.proto. */
function encodedCalls(): Buffer[] {
  const Request = upstreamRoot().lookupType("envoy.service.ratelimit.v3.RateLimitRequest");
  return Array.from({ length: POPULATION }, (_, index) => {
    const address = { key: "remote_address", value: clientAddress(index) };
    const message = Request.fromObject({
      domain: "edge",
      descriptors: [{ entries: [address] }, { entries: [address, { key: "path", value: PATH }] }],
    });
    return Buffer.from(Request.encode(message).finish());
  });
}

type Unary = (request: Buffer, callback: (error: Error | null) => void) => void;

/**
 * The load's gRPC client: unary calls written straight on one HTTP/2 session (node:http2), the
 * messages encoded beforehand and the answers not decoded beyond their gRPC status, so that the
 * client spends as little of the shared cores as it can. (The tests use @grpc/grpc-js and
 * python3-grpcio for what the answers say.)
 */
function rawClient(port: number): { call: Unary; close(): void } {
  const session = connect(`http://127.0.0.1:${port}`);
  session.on("error", () => undefined);
  const headers = {
    ":method": "POST",
    ":path": "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
    "content-type": "application/grpc",
    te: "trailers",
  };
  const framed = new Map<Buffer, Buffer>();
  return {
    call: (request, callback) => {
      let frame = framed.get(request);
      if (frame === undefined) {
        frame = Buffer.alloc(5 + request.length);
        frame.writeUInt32BE(request.length, 1);
        request.copy(frame, 5);
        framed.set(request, frame);
      }
      const stream = session.request(headers);
      let status: string | undefined;
      stream.on("trailers", (trailers) => {
        status = String(trailers["grpc-status"]);
      });
      stream.on("data", () => undefined);
      stream.on("close", () =>
        callback(status === "0" ? null : new Error(`grpc-status ${status ?? "missing"}`)),
      );
      stream.end(frame);
    },
    close: () => session.close(),
  };
}

// ---- 1 and 2: gRPC at saturation and at fixed rates --------------------------------------------

async function saturate(
  rls: Server,
  calls: Buffer[],
): Promise<{ perCore: number; perSecond: number }> {
  const client = rawClient(rls.port);
  let next = 0;
  let done = 0;
  let failed = 0;
  const until = performance.now() + SECONDS * 1000;
  const before = cpuSeconds(rls.pid);
  const started = performance.now();
  await new Promise<void>((resolve) => {
    let running = 0;
    const launch = () => {
      running++;
      client.call(calls[next++ % calls.length] as Buffer, (error) => {
        running--;
        if (error !== null) failed++;
        done++;
        if (performance.now() < until) launch();
        else if (running === 0) resolve();
      });
    };
    for (let i = 0; i < IN_FLIGHT; i++) launch();
  });
  const elapsed = (performance.now() - started) / 1000;
  const cpu = cpuSeconds(rls.pid) - before;
  client.close();
  if (failed > 0) throw new Error(`${failed} gRPC calls failed`);
  return { perCore: done / cpu, perSecond: done / elapsed };
}

async function fixedRate(
  rls: Server,
  calls: Buffer[],
  rate: number,
): Promise<{ p50: number; p99: number }> {
  const client = rawClient(rls.port);
  const total = rate * RATE_SECONDS;
  const latencies: number[] = [];
  const start = performance.now() + 50;
  let sent = 0;
  await new Promise<void>((resolve) => {
    const tick = () => {
      const now = performance.now();
      while (sent < total && start + (sent * 1000) / rate <= now) {
        const dueAt = start + (sent * 1000) / rate;
        client.call(calls[sent % calls.length] as Buffer, () => {
          latencies.push(performance.now() - dueAt);
          if (latencies.length === total) resolve();
        });
        sent++;
      }
      if (sent < total) setImmediate(tick);
    };
    setImmediate(tick);
  });
  client.close();
  latencies.sort((a, b) => a - b);
  const at = (share: number) =>
    latencies[Math.min(latencies.length - 1, Math.floor(share * latencies.length))] as number;
  return { p50: at(0.5), p99: at(0.99) };
}

async function startRls(args: string[]): Promise<Server> {
  const grpcPort = await freePort();
  const argv = [process.execPath, "dist/cli/main.js", "rls", ...args];
  argv.push("--grpc-port", String(grpcPort), "--http-port", String(await freePort()));
  argv.push("--admin-port", String(await freePort()), "--host", "127.0.0.1");
  // startServer waits for HTTP; the gRPC port of the same process is up by then.
  const httpPort = Number(argv[argv.indexOf("--http-port") + 1]);
  const server = await startServer(httpPort, argv, { ...process.env, ...SECRETS });
  return { port: grpcPort, pid: server.pid };
}

// ---- 3: Redis server time -------------------------------------------------------------------

interface CommandTime {
  readonly calls: number;
  readonly usec: number;
}

async function commandTimes(redis: Redis): Promise<Map<string, CommandTime>> {
  const text = await redis.info("commandstats");
  const times = new Map<string, CommandTime>();
  for (const match of text.matchAll(/cmdstat_(\w+):calls=(\d+),usec=(\d+)/g)) {
    times.set(match[1] as string, { calls: Number(match[2]), usec: Number(match[3]) });
  }
  return times;
}

/** envoyproxy/ratelimit's pattern: INCRBY and EXPIRE per descriptor, one pipeline per decision. */
async function referencePattern(redis: Redis, decisions: number): Promise<void> {
  const window = Math.floor(Date.now() / 60_000) * 60;
  let next = 0;
  const worker = async () => {
    while (next < decisions) {
      const address = clientAddress(next++);
      const keys = [
        `edge_remote_address_${address}_${window}`,
        `edge_remote_address_${address}_path_${PATH}_${window}`,
      ];
      const pipeline = redis.pipeline();
      for (const key of keys) pipeline.incrby(key, 1).expire(key, 60);
      await pipeline.exec();
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
}

// ---- 4: the whole path behind nginx ---------------------------------------------------------

async function startUpstream(): Promise<Server> {
  const port = await freePort();
  const source = `require("node:http").createServer((req, res) => { res.writeHead(200, { "content-type": "application/json" }); res.end('{"ok":true}'); }).listen(${port}, "127.0.0.1")`;
  return startServer(port, [process.execPath, "-e", source]);
}

/** The http block of examples/rls/nginx.conf, pointed at this bench's app and rls. */
function authRequestHttpBlock(app: Server, rlsHttpPort: number): string {
  const example = readFileSync("examples/rls/nginx.conf", "utf8");
  const http = example.slice(example.indexOf("http {") + "http {".length, example.lastIndexOf("}"));
  return http
    .replaceAll("127.0.0.1:3000", `127.0.0.1:${app.port}`)
    .replaceAll("127.0.0.1:8080", `127.0.0.1:${rlsHttpPort}`);
}

const WRK_SCRIPT = `local n = 0
request = function()
  n = n + 1
  local i = n % ${POPULATION}
  local ip = "10.9." .. math.floor(i / 250) .. "." .. (i % 250 + 1)
  return wrk.format("GET", "${PATH}?q=shoes", { ["X-Forwarded-For"] = ip })
end`;

/** wrk at saturation; the CPU of `serving` per completed request, in µs. */
function wrk(
  port: number,
  serving: readonly Server[],
  seconds: number,
): { cpuMicros: number; rps: number; refused: number } {
  const script = join(dir, "returning.lua");
  writeFileSync(script, WRK_SCRIPT);
  const cpu = () => serving.reduce((sum, server) => sum + cpuSeconds(server.pid), 0);
  const before = cpu();
  const output = execFileSync(
    "wrk",
    ["-t1", `-c${CONNECTIONS}`, `-d${seconds}s`, "-s", script, `http://127.0.0.1:${port}`],
    { encoding: "utf8" },
  );
  const used = cpu() - before;
  const requests = Number(/(\d+) requests in/.exec(output)?.[1]);
  return {
    cpuMicros: (used / requests) * 1e6,
    rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(output)?.[1]),
    refused: Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(output)?.[1] ?? 0) / requests,
  };
}

// ---- figures --------------------------------------------------------------------------------

async function main(): Promise<void> {
  execFileSync("npm", ["run", "build"], { stdio: "ignore" });
  writeFileSync(join(dir, "config.yaml"), CONFIG);
  const redisServer = await startRedis();
  const redisPort = redisServer.server.port;
  const redis = new Redis({ port: redisPort, host: "127.0.0.1" });
  const calls = encodedCalls();
  const config = ["--config", join(dir, "config.yaml")];
  const memoryRls = await startRls(config);
  const redisRls = await startRls([...config, "--store", `redis://127.0.0.1:${redisPort}`]);
  const stores = [
    { name: "memory", rls: memoryRls },
    { name: "redis", rls: redisRls },
  ];

  if (PARTS.has(1)) await saturationPart(stores, calls);
  if (PARTS.has(2)) await fixedRatePart(stores, calls);
  if (PARTS.has(3)) await redisPart(redis, redisRls, calls);
  if (PARTS.has(4)) await pathPart();
  const load = readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
  out(
    `machine: ${cpus().length} cpus, ${cpus()[0]?.model ?? "?"}, node ${process.version}; load average at the end ${load}`,
  );
  redis.disconnect();
  await redisServer.cleanup();
}

type Stores = readonly { readonly name: string; readonly rls: Server }[];

async function saturationPart(stores: Stores, calls: Buffer[]): Promise<void> {
  for (const { rls } of stores) await saturate(rls, calls); // warm-up: JIT, connections
  const saturation = new Map<string, { perCore: number; perSecond: number }[]>();
  for (let round = 0; round < ROUNDS; round++) {
    for (const { name, rls } of round % 2 === 0 ? stores : [...stores].reverse()) {
      const runs = saturation.get(name) ?? [];
      runs.push(await saturate(rls, calls));
      saturation.set(name, runs);
    }
  }
  out(
    `1. gRPC ShouldRateLimit at saturation (${IN_FLIGHT} in flight, two descriptors a call), medians of ${ROUNDS} rounds:`,
  );
  for (const [name, runs] of saturation) {
    out(
      `   ${name.padEnd(7)} ${median(runs.map((run) => run.perCore))
        .toFixed(0)
        .padStart(
          6,
        )} decisions/s per core of the service (${runs.map((run) => run.perCore.toFixed(0)).join(", ")}), ${median(runs.map((run) => run.perSecond)).toFixed(0)} decisions/s from the client`,
    );
  }
}

async function fixedRatePart(stores: Stores, calls: Buffer[]): Promise<void> {
  out(
    `2. p50 / p99 at fixed rates (open loop, ${RATE_SECONDS} s each, medians of ${ROUNDS} rounds):`,
  );
  for (const rate of RATES) {
    for (const { name, rls } of stores) {
      const runs: { p50: number; p99: number }[] = [];
      for (let round = 0; round < ROUNDS; round++) runs.push(await fixedRate(rls, calls, rate));
      out(
        `   ${String(rate).padStart(5)}/s ${name.padEnd(7)} p50 ${median(runs.map((run) => run.p50)).toFixed(2)} ms, p99 ${median(runs.map((run) => run.p99)).toFixed(2)} ms (p99 by round: ${runs.map((run) => run.p99.toFixed(2)).join(", ")})`,
      );
    }
  }
}

/** Our script calls' server time against the reference's pattern, for the same decisions. */
async function redisPart(redis: Redis, redisRls: Server, calls: Buffer[]): Promise<void> {
  const decisions = 20_000;
  await redis.config("RESETSTAT");
  const client = rawClient(redisRls.port);
  let next = 0;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next < decisions) {
        const call = calls[next++ % calls.length] as Buffer;
        await new Promise<void>((resolve, reject) =>
          client.call(call, (error) => (error === null ? resolve() : reject(error))),
        );
      }
    }),
  );
  client.close();
  const ours = await commandTimes(redis);
  await redis.config("RESETSTAT");
  await referencePattern(redis, decisions);
  const reference = await commandTimes(redis);
  const usec = (times: Map<string, CommandTime>, names: string[]) =>
    names.reduce((sum, name) => sum + (times.get(name)?.usec ?? 0), 0);
  const callsOf = (times: Map<string, CommandTime>, names: string[]) =>
    names
      .map((name) => {
        const { calls = 0, usec: spent = 0 } = times.get(name) ?? {};
        return `${name} ${calls}${calls > 0 ? ` at ${(spent / calls).toFixed(2)} µs` : ""}`;
      })
      .join(", ");
  // Every command the service sent: fixed windows as INCRBY and PEXPIRE, other algorithms as
  // a call of the Redis 7 function (FCALL) or of the script, the store's TIME samples.
  const SENT = [...ours.keys()].filter((name) => name !== "config" && name !== "info");
  const oursPer = usec(ours, SENT) / decisions;
  const referencePer = usec(reference, ["incrby", "expire"]) / decisions;
  out(
    `3. Redis server time per decision (INFO commandstats, ${decisions} decisions of two descriptors):`,
  );
  out(`   edgelimit rls  ${oursPer.toFixed(2)} µs (${callsOf(ours, SENT)})`);
  out(
    `   reference      ${referencePer.toFixed(2)} µs (${callsOf(reference, ["incrby", "expire"])}: INCRBY + EXPIRE per descriptor, pipelined)`,
  );
  out(`   ratio          ${(oursPer / referencePer).toFixed(2)}x the reference's`);
}

async function pathPart(): Promise<void> {
  const app = await startUpstream();
  const policyRlsHttp = await freePort();
  const policyRls = await startServer(
    policyRlsHttp,
    [
      process.execPath,
      "dist/cli/main.js",
      "rls",
      "--policy",
      POLICY,
      "--http-port",
      String(policyRlsHttp),
      "--grpc-port",
      String(await freePort()),
      "--admin-port",
      String(await freePort()),
      "--host",
      "127.0.0.1",
    ],
    { ...process.env, ...SECRETS },
  );
  const authRequest = await startNginx(
    join(dir, "auth-request"),
    authRequestHttpBlock(app, policyRlsHttp),
  );
  const limitReq = await startNginx(join(dir, "limit-req"), limitReqHttp(app.port));
  const servePort = await freePort();
  const serve = await startServer(
    servePort,
    [
      process.execPath,
      "dist/cli/main.js",
      "serve",
      "--policy",
      POLICY,
      "--upstream",
      `http://127.0.0.1:${app.port}`,
      "--host",
      "127.0.0.1",
      "--port",
      String(servePort),
      "--admin-port",
      String(await freePort()),
      "--log-sample",
      "0",
    ],
    { ...process.env, ...SECRETS },
  );
  const paths = [
    {
      name: "nginx + auth_request + rls",
      port: authRequest.port,
      serving: [authRequest, policyRls],
    },
    { name: "nginx limit_req", port: limitReq.port, serving: [limitReq] },
    { name: "edgelimit serve", port: serve.port, serving: [serve] },
  ];
  for (const path of paths) wrk(path.port, path.serving, 1); // warm-up
  const byPath = new Map<string, ReturnType<typeof wrk>[]>();
  for (let round = 0; round < ROUNDS; round++) {
    for (const path of round % 2 === 0 ? paths : [...paths].reverse()) {
      const runs = byPath.get(path.name) ?? [];
      runs.push(wrk(path.port, path.serving, SECONDS));
      byPath.set(path.name, runs);
    }
  }
  out(
    `4. CPU per request of the whole path (every serving process, not the app), wrk -c${CONNECTIONS}, 10,000 returning clients, medians of ${ROUNDS} rounds:`,
  );
  const cpuOf = (name: string) => median((byPath.get(name) ?? []).map((run) => run.cpuMicros));
  for (const path of paths) {
    const runs = byPath.get(path.name) ?? [];
    out(
      `   ${path.name.padEnd(27)} ${cpuOf(path.name).toFixed(1).padStart(6)} µs/req  ${median(
        runs.map((run) => run.rps),
      )
        .toFixed(0)
        .padStart(
          6,
        )} req/s  refused ${median(runs.map((run) => run.refused)).toFixed(3)}  (µs/req by round: ${runs.map((run) => run.cpuMicros.toFixed(1)).join(", ")})`,
    );
  }
  const nginxRls = cpuOf("nginx + auth_request + rls");
  out(
    `   nginx + auth_request + rls: ${(nginxRls / cpuOf("nginx limit_req")).toFixed(2)}x nginx limit_req's CPU per request, ${(nginxRls / cpuOf("edgelimit serve")).toFixed(2)}x edgelimit serve's`,
  );
}

main()
  .catch((error: unknown) => {
    process.stderr.write(
      `${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    process.exitCode = 1;
  })
  .finally(async () => {
    await stopServers();
    rmSync(dir, { recursive: true, force: true });
  });
