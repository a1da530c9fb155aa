/**
 * `npm run bench -- rls` (or `npx tsx bench/rls.bench.ts`): the rate limit service on loopback,
 * every figure beside the transport's floor measured in the same run. Needs redis-server (and
 * nginx and wrk for part 4); builds the CLI first and runs `dist/cli/main.js`, as users do.
 *
 * Five servers answer the same `ShouldRateLimit` calls (two descriptors each: the client's
 * address, and the address with the path, as Envoy's route sends them; 10,000 returning
 * clients): the floor, a canned answer on node:http2 and on @grpc/grpc-js
 * (support/canned-rls-process.ts), rls's own gRPC listener answering the canned message
 * without a decision ("rls listener": what rls's transport and codec add to the floor), and
 * `edgelimit rls --config` on the memory store and on a redis-server the bench starts. Each
 * runs pinned to the first core (`taskset`), the load generator in its own process on the last
 * (support/grpc-load-process.ts), Redis beside it.
 *
 * 1. Server CPU per call at saturation (64 calls in flight on one HTTP/2 session, as Envoy
 *    multiplexes its calls): the server process's utime + stime (/proc/<pid>/stat) over the
 *    calls it answered, and its ratio to the node:http2 floor's in the same round.
 * 2. p50/p99 and CPU per call at fixed rates (open loop from a 1 ms timer: latency from the
 *    moment a call fell due, so a slow server shows as latency, not as a lower rate).
 * 3. Redis server time per decision against the reference's pattern (support/rls-redis-time.ts).
 * 4. CPU per request of the whole path behind nginx (support/rls-path.ts; skipped without wrk).
 * 5. `/check/nginx` on node:http: server CPU per request at saturation (64 keep-alive
 *    connections, one request in flight on each, as nginx's auth_request subrequests), for a
 *    node:http server answering a canned 200 (the floor) and `edgelimit rls --policy
 *    examples/policies/cloudfront.yaml`.
 *
 * Rounds interleave the servers; figures are medians. Knobs: RLS_BENCH_SECONDS (each
 * saturation run, default 1.5), RLS_BENCH_ROUNDS (default 5), RLS_BENCH_RATE_ROUNDS (part 2's,
 * default 3), RLS_BENCH_RATES (default "1000,5000"), RLS_BENCH_PARTS (default "1,2,3,4,5"),
 * RLS_BENCH_PIN=0 (servers and load unpinned), RLS_BENCH_BEFORE (another checkout with its dist/
 * built: its `rls --config` on the memory store joins parts 1 and 2, and its `/check` part 5,
 * as "before").
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Redis } from "ioredis";
import { startRedis } from "../test/redis/redis-server.js";
import {
  CORES,
  type GrpcLoad,
  type LoadResult,
  pinned,
  startGrpcLoad,
} from "./support/grpc-load.js";
import { median } from "./support/median.js";
import {
  freePort,
  type Server,
  startPrinting,
  startServer,
  stopServers,
} from "./support/processes.js";
import { CONFIG, HYBRID_CONFIG, POPULATION } from "./support/rls-calls.js";
import { hasWrk, pathPart } from "./support/rls-path.js";
import { callsOf, commandTimes, referencePattern, usecOf } from "./support/rls-redis-time.js";

const SECONDS = Number(process.env.RLS_BENCH_SECONDS ?? 1.5);
const ROUNDS = Number(process.env.RLS_BENCH_ROUNDS ?? 5);
const RATE_ROUNDS = Number(process.env.RLS_BENCH_RATE_ROUNDS ?? 3);
/** Which parts to run (default all): `RLS_BENCH_PARTS=1,3`. */
const PARTS = new Set(
  (process.env.RLS_BENCH_PARTS ?? "1,2,3,4,5").split(",").map(Number).filter(Boolean),
);
const RATES = (process.env.RLS_BENCH_RATES ?? "1000,5000").split(",").map(Number).filter(Boolean);
const RATE_SECONDS = 2;
const IN_FLIGHT = 64;
const SECRETS = {
  EDGELIMIT_JWT_SECRET: "bench-secret-not-used-by-anonymous-traffic",
  EDGELIMIT_CHALLENGE_SECRET: "bench-challenge-secret-not-used",
};

const here = dirname(fileURLToPath(import.meta.url));
const dir = mkdtempSync(join(tmpdir(), "edgelimit-rls-bench-"));
const out = (line: string) => process.stdout.write(`${line}\n`);

interface Case {
  readonly name: string;
  readonly server: Server;
}

/** rls with `args`; its gRPC port (`http`: its HTTP port) as the server's. */
async function startRls(args: string[], root = ".", http = false): Promise<Server> {
  const grpcPort = await freePort();
  const httpPort = await freePort();
  const argv = [process.execPath, join(root, "dist/cli/main.js"), "rls", ...args];
  argv.push("--grpc-port", String(grpcPort), "--http-port", String(httpPort));
  argv.push("--admin-port", String(await freePort()), "--host", "127.0.0.1");
  // startServer waits for HTTP; the gRPC port of the same process is up by then.
  const server = await startServer(httpPort, pinned("server", argv), {
    ...process.env,
    ...SECRETS,
  });
  return { port: http ? httpPort : grpcPort, pid: server.pid };
}

function startCanned(kind: "http2" | "grpc-js" | "listener" | "http1"): Promise<Server> {
  const script = join(here, "support", "canned-rls-process.ts");
  return startPrinting(pinned("server", [process.execPath, "--import", "tsx", script, kind]));
}

const micros = (run: LoadResult) => (run.serverCpu / run.calls) * 1e6;
const fixed = (value: number, digits = 1) => value.toFixed(digits);

/** Each case's runs, the cases interleaved (every other round in reverse). */
async function rounds(
  cases: readonly Case[],
  count: number,
  measure: (server: Server) => Promise<LoadResult>,
): Promise<Map<string, LoadResult[]>> {
  const runs = new Map<string, LoadResult[]>(cases.map((one) => [one.name, []]));
  for (let round = 0; round < count; round++) {
    for (const { name, server } of round % 2 === 0 ? cases : [...cases].reverse()) {
      const run = await measure(server);
      if (run.failed > 0) throw new Error(`${name}: ${run.failed} of the calls failed`);
      runs.get(name)?.push(run);
    }
  }
  return runs;
}

/** CPU per call of each case, with its ratio to the floor's of the same round. */
function cpuLines(runs: Map<string, LoadResult[]>, floor: string): string[] {
  const floorRuns = runs.get(floor) ?? [];
  return [...runs].map(([name, list]) => {
    const ratios = list.map((run, round) => micros(run) / micros(floorRuns[round] as LoadResult));
    return `   ${name.padEnd(18)} ${fixed(median(list.map(micros))).padStart(6)} µs CPU/call  ${fixed(median(ratios), 2)}x the floor  (by round: ${list.map((run) => fixed(micros(run))).join(", ")} µs; ${ratios.map((ratio) => fixed(ratio, 2)).join(", ")}x)`;
  });
}

async function saturationPart(cases: readonly Case[], load: GrpcLoad): Promise<void> {
  const order = (server: Server, seconds: number) =>
    load.run({
      kind: "saturate",
      port: server.port,
      pid: server.pid,
      seconds,
      inFlight: IN_FLIGHT,
    });
  for (const { server } of cases) await order(server, 1); // warm-up: JIT, sessions
  const runs = await rounds(cases, ROUNDS, (server) => order(server, SECONDS));
  out(
    `1. Server CPU per call at saturation (${IN_FLIGHT} in flight on one HTTP/2 session, two descriptors a call), medians of ${ROUNDS} rounds of ${SECONDS} s; ratios to the node:http2 floor of the same round:`,
  );
  for (const line of cpuLines(runs, cases[0]?.name ?? "")) out(line);
  out(
    `   calls/s from the client: ${[...runs].map(([name, list]) => `${name} ${fixed(median(list.map((run) => run.calls / run.seconds)), 0)}`).join(", ")}`,
  );
}

async function fixedRatePart(cases: readonly Case[], load: GrpcLoad): Promise<void> {
  out(
    `2. Fixed rates (open loop from a 1 ms timer, ${RATE_SECONDS} s each, latency from when a call fell due), medians of ${RATE_ROUNDS} rounds:`,
  );
  for (const rate of RATES) {
    const runs = await rounds(cases, RATE_ROUNDS, (server) =>
      load.run({ kind: "rate", port: server.port, pid: server.pid, rate, seconds: RATE_SECONDS }),
    );
    for (const line of cpuLines(runs, cases[0]?.name ?? "")) out(`${rate}/s${line.slice(2)}`);
    for (const [name, list] of runs) {
      const p = (pick: (latency: NonNullable<LoadResult["latency"]>) => number) =>
        list.map((run) => (run.latency === undefined ? Number.NaN : pick(run.latency)));
      out(
        `   ${String(rate).padStart(5)}/s ${name.padEnd(18)} p50 ${fixed(median(p((l) => l.p50)), 2)} ms, p99 ${fixed(median(p((l) => l.p99)), 2)} ms (p99 by round: ${p(
          (l) => l.p99,
        )
          .map((value) => fixed(value, 2))
          .join(", ")}; the timer's own p99 lateness ${fixed(median(p((l) => l.lateP99)), 2)} ms)`,
      );
    }
  }
}

async function checkPart(load: GrpcLoad): Promise<void> {
  const cases: Case[] = [
    { name: "floor node:http", server: await startCanned("http1") },
    {
      name: "rls /check",
      server: await startRls(["--policy", "examples/policies/cloudfront.yaml"], ".", true),
    },
  ];
  const before = process.env.RLS_BENCH_BEFORE;
  if (before !== undefined) {
    const policy = ["--policy", "examples/policies/cloudfront.yaml"];
    cases.push({ name: "before /check", server: await startRls(policy, before, true) });
  }
  const order = (server: Server, seconds: number) =>
    load.run({
      kind: "saturate",
      protocol: "check",
      port: server.port,
      pid: server.pid,
      seconds,
      inFlight: IN_FLIGHT,
    });
  for (const { server } of cases) await order(server, 1); // warm-up
  const runs = await rounds(cases, ROUNDS, (server) => order(server, SECONDS));
  out(
    `5. /check/nginx on node:http at saturation (${IN_FLIGHT} keep-alive connections, one request in flight on each), medians of ${ROUNDS} rounds of ${SECONDS} s; ratios to the node:http floor of the same round:`,
  );
  for (const line of cpuLines(runs, "floor node:http")) out(line);
  out(
    `   requests/s from the client: ${[...runs].map(([name, list]) => `${name} ${fixed(median(list.map((run) => run.calls / run.seconds)), 0)}`).join(", ")}`,
  );
}

/** The commands `rls` sent to Redis for `decisions` calls at saturation, from INFO commandstats. */
async function commandsFor(redis: Redis, rls: Server, load: GrpcLoad, decisions: number) {
  await redis.config("RESETSTAT");
  const run = await load.run({
    kind: "saturate",
    port: rls.port,
    pid: rls.pid,
    seconds: 120,
    inFlight: IN_FLIGHT,
    total: decisions,
  });
  if (run.failed > 0) throw new Error(`${run.failed} gRPC calls failed`);
  const times = await commandTimes(redis);
  // Every command the service sent: fixed windows as INCRBY and PEXPIRE, other algorithms and
  // hybrid reservations as a call of the Redis 7 function (FCALL) or of the script, TIME samples.
  const sent = [...times.keys()].filter((name) => name !== "config" && name !== "info");
  return { times, sent, calls: sent.reduce((sum, name) => sum + (times.get(name)?.calls ?? 0), 0) };
}

/** Our commands' server time against the reference's pattern, for the same decisions. */
async function redisPart(
  redis: Redis,
  redisRls: Server,
  hybridRls: Server,
  load: GrpcLoad,
): Promise<void> {
  const decisions = 20_000;
  const ours = await commandsFor(redis, redisRls, load, decisions);
  // The same calls again, counted hybrid: the clients' second and later calls in the window.
  const hybrid = await commandsFor(redis, hybridRls, load, decisions);
  await redis.config("RESETSTAT");
  await referencePattern(redis, decisions, IN_FLIGHT);
  const reference = await commandTimes(redis);
  const oursPer = usecOf(ours.times, ours.sent) / decisions;
  const hybridPer = usecOf(hybrid.times, hybrid.sent) / decisions;
  const referencePer = usecOf(reference, ["incrby", "expire"]) / decisions;
  out(
    `3. Redis server time per decision (INFO commandstats, ${decisions} decisions of two descriptors, ${POPULATION} clients):`,
  );
  out(`   edgelimit rls  ${fixed(oursPer, 2)} µs (${callsOf(ours.times, ours.sent)})`);
  out(
    `   rls, hybrid    ${fixed(hybridPer, 2)} µs, ${fixed(hybrid.calls / decisions, 3)} commands per decision (${callsOf(hybrid.times, hybrid.sent)})`,
  );
  out(
    `   reference      ${fixed(referencePer, 2)} µs (${callsOf(reference, ["incrby", "expire"])}: INCRBY + EXPIRE per descriptor, pipelined)`,
  );
  out(
    `   ratio          ${fixed(oursPer / referencePer, 2)}x the reference's (hybrid ${fixed(hybridPer / referencePer, 2)}x)`,
  );
}

const loadAverage = () => readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");

async function main(): Promise<void> {
  out(`load average at the start ${loadAverage()}`);
  execFileSync("npm", ["run", "build"], { stdio: "ignore" });
  writeFileSync(join(dir, "config.yaml"), CONFIG);
  writeFileSync(join(dir, "hybrid.yaml"), HYBRID_CONFIG);
  const redisServer = await startRedis();
  const redisPort = redisServer.server.port;
  // Redis shares the load generator's core, so that the servers measured have theirs alone.
  const redisPid = redisServer.server.pid;
  if (CORES !== undefined && redisPid !== undefined) {
    execFileSync("taskset", ["-pc", String(CORES.load), String(redisPid)], { stdio: "ignore" });
  }
  const redis = new Redis({ port: redisPort, host: "127.0.0.1" });
  const config = ["--config", join(dir, "config.yaml")];
  const cases: Case[] = [
    { name: "floor node:http2", server: await startCanned("http2") },
    { name: "floor grpc-js", server: await startCanned("grpc-js") },
    { name: "rls listener", server: await startCanned("listener") },
    { name: "rls memory", server: await startRls(config) },
    {
      name: "rls redis",
      server: await startRls([...config, "--store", `redis://127.0.0.1:${redisPort}`]),
    },
    {
      name: "rls redis hybrid",
      server: await startRls([
        "--config",
        join(dir, "hybrid.yaml"),
        "--store",
        `redis://127.0.0.1:${redisPort}/1`,
      ]),
    },
  ];
  const before = process.env.RLS_BENCH_BEFORE;
  if (before !== undefined) {
    cases.splice(3, 0, { name: "before memory", server: await startRls(config, before) });
  }
  const redisCase = cases.find((one) => one.name === "rls redis") as Case;
  const hybridCase = cases.find((one) => one.name === "rls redis hybrid") as Case;
  const load = await startGrpcLoad();
  try {
    out(
      CORES === undefined
        ? "servers and load generator unpinned (no taskset or one core)"
        : `servers on core ${CORES.server}, load generator and redis-server on core ${CORES.load} (taskset)`,
    );
    if (PARTS.has(1)) await saturationPart(cases, load);
    if (PARTS.has(2)) await fixedRatePart(cases, load);
    if (PARTS.has(3)) await redisPart(redis, redisCase.server, hybridCase.server, load);
    if (PARTS.has(5)) await checkPart(load);
    load.close();
    if (PARTS.has(4)) {
      if (hasWrk()) {
        await pathPart(dir, {
          rounds: ROUNDS,
          seconds: SECONDS,
          env: { ...process.env, ...SECRETS },
          out,
        });
      } else out("4. skipped: wrk is not installed");
    }
    out(
      `machine: ${cpus().length} cpus, ${cpus()[0]?.model ?? "?"}, node ${process.version}; load average at the end ${loadAverage()}`,
    );
  } finally {
    // Also when a part throws: no redis-server is left running.
    load.close();
    redis.disconnect();
    await redisServer.cleanup();
  }
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
