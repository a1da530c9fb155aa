/**
 * Redis store benchmark, against rate-limiter-flexible's RateLimiterRedis in the same run, on
 * one redis-server the bench starts (`--save "" --appendonly no`, loopback):
 *
 * 1. Decisions per second with 256 concurrent callers, and what each decision cost the bench
 *    process and redis-server in CPU time: the peer (with and without ioredis auto-pipelining),
 *    `RedisStore.apply` and `limiter.check`, each with one script call per request
 *    (`maxBatch: 1`) and as `redisStoreFromUrl` builds the store (a tick's requests in one call).
 * 2. redis-server CPU time per decision at 1, 16 and 64 callers, `limiter.check` against the
 *    peer's `consume`.
 * 3. Redis server time per decision (`INFO commandstats`: the time Redis spent in every command
 *    a decision sent, over the decisions), one caller, one call per decision: the fixed-window
 *    rules of examples/policies/cloudfront.yaml (a request with one counter, and one with two:
 *    counted without the script, INCRBY and PEXPIRE per counter), and one sliding-window and one
 *    token-bucket rule with the same limit; the reference's pattern (envoyproxy/ratelimit's
 *    INCRBY and EXPIRE per counter, pipelined); and, called directly, the function as the store
 *    called it for fixed windows before they were counted without it (`f` specs), the same Lua
 *    as a script, and the previous version's script.
 * 4. The seed's attack (one IP at 800 requests/s against 60/min for 60 s of simulated time)
 *    and the Redis round trips per blocked request.
 *
 * Rounds interleave the contenders so that load from other jobs on the machine hits them
 * alike; ratios are taken within a round, and the median of the rounds is reported.
 *
 *   npx tsx bench/redis.bench.ts   (BENCH_ROUNDS=5 rounds, BENCH_SECONDS=2 s per scenario)
 */
import { execFileSync } from "node:child_process";
import { cpus } from "node:os";
import { fileURLToPath } from "node:url";
import { Redis } from "ioredis";
import { RateLimiterRedis } from "rate-limiter-flexible";
import { createLimiter } from "../src/limiter.js";
import { definePolicy, loadPolicy } from "../src/policy/load.js";
import {
  APPLY_COUNTERS_FUNCTION,
  APPLY_COUNTERS_LUA,
  APPLY_COUNTERS_SHA,
  RedisStore,
  redisClientOptions,
} from "../src/stores/redis.js";
import { SPAN_TEXT_LUA } from "../test/redis/previous-scripts.js";
import { startRedis } from "../test/redis/redis-server.js";
import {
  addressFor,
  counterFor,
  formatNumber,
  median,
  medianRatio,
  type Operation,
  type Run,
  runCallers,
  serverTime,
  table,
  throughputTable,
} from "./support/redis-load.js";

const CALLERS = 256;
const SECONDS = Number(process.env.BENCH_SECONDS ?? 2);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const WARMUP_MS = 300;
const UNLIMITED = 1_000_000_000;
const CLOUDFRONT = fileURLToPath(new URL("../examples/policies/cloudfront.yaml", import.meta.url));

process.env.EDGELIMIT_JWT_SECRET ??= "bench-secret-not-used-by-anonymous-traffic";
process.env.EDGELIMIT_CHALLENGE_SECRET ??= "bench-challenge-secret-not-used";

const unlimitedPolicy = definePolicy({
  budget: "1s",
  tiers: { anonymous: { global: { limit: UNLIMITED, window: "60s" } } },
});

const { server, cleanup } = await startRedis();
const port = server.port;
const admin = new Redis({ port, host: "127.0.0.1" });
const nodes = [admin];
/** Clients the bench made (closed at the end), each connected before it is used. */
const clients: Redis[] = [];
async function client(options: Record<string, unknown> = {}): Promise<Redis> {
  const made = new Redis({ port, host: "127.0.0.1", ...redisClientOptions(), ...options });
  clients.push(made);
  await new Promise((resolve) => made.once("ready", resolve));
  return made;
}
/** A store on a client of its own; `maxBatch: 1` sends one script call per request. */
async function store(maxBatch?: number): Promise<RedisStore> {
  const made = new RedisStore({
    client: await client(),
    ...(maxBatch === undefined ? {} : { maxBatch }),
  });
  await made.ready();
  return made;
}
function peer(points: number, options: Record<string, unknown> = {}): Promise<RateLimiterRedis> {
  return client(options).then(
    (storeClient) => new RateLimiterRedis({ storeClient, points, duration: 60 }),
  );
}

try {
  const unbatched = await store(1);
  const batched = await store();
  const peerLimiter = await peer(UNLIMITED);
  const peerPipelined = await peer(UNLIMITED, { enableAutoPipelining: true });
  const check = createLimiter({ store: batched, policy: unlimitedPolicy });
  const checkUnbatched = createLimiter({ store: unbatched, policy: unlimitedPolicy });

  // 1. Throughput at 256 callers.
  const scenarios: [string, Operation][] = [
    ["rate-limiter-flexible RateLimiterRedis", (c, i) => peerLimiter.consume(addressFor(c, i))],
    [
      "rate-limiter-flexible RateLimiterRedis + autoPipelining",
      (c, i) => peerPipelined.consume(addressFor(c, i)),
    ],
    [
      "edgelimit RedisStore.apply, maxBatch 1",
      (c, i) => unbatched.apply([counterFor(addressFor(c, i), UNLIMITED)], 0),
    ],
    [
      "edgelimit RedisStore.apply",
      (c, i) => batched.apply([counterFor(addressFor(c, i), UNLIMITED)], 0),
    ],
    [
      "edgelimit limiter.check, maxBatch 1 (1 rule)",
      (c, i) => checkUnbatched.check({ ip: addressFor(c, i), path: "/api/items" }),
    ],
    [
      "edgelimit limiter.check (1 rule)",
      (c, i) => check.check({ ip: addressFor(c, i), path: "/api/items" }),
    ],
  ];
  const runs = new Map<string, Run[]>(scenarios.map(([name]) => [name, []]));
  for (let round = 1; round <= ROUNDS; round++) {
    for (const [name, operation] of scenarios) {
      await admin.flushall();
      runs
        .get(name)
        ?.push(
          await runCallers(CALLERS, operation, nodes, { seconds: SECONDS, warmupMs: WARMUP_MS }),
        );
    }
    process.stdout.write(`throughput round ${round}/${ROUNDS} done\n`);
  }
  process.stdout.write(
    `\n${CALLERS} callers, decisions per second and CPU time per decision (µs)\n${throughputTable(runs, true)}`,
  );

  // 2. redis-server CPU per decision at 1, 16 and 64 callers.
  const decisions = Number(process.env.BENCH_DECISIONS ?? 20_000);
  const sweep: [string, Operation][] = [
    ["rate-limiter-flexible", (c, i) => peerLimiter.consume(addressFor(c, i))],
    ["edgelimit limiter.check", (c, i) => check.check({ ip: addressFor(c, i), path: "/x" })],
  ];
  const sweepRows: string[][] = [];
  for (const callers of [1, 16, 64]) {
    const cost = new Map<string, number[]>(sweep.map(([name]) => [name, []]));
    for (let round = 0; round < Math.max(3, Math.ceil(ROUNDS / 2)); round++) {
      for (const [name, operation] of sweep) {
        await admin.flushall();
        const run = await runCallers(callers, operation, nodes, { decisions });
        cost.get(name)?.push(run.serverMicros);
      }
    }
    const peerCost = cost.get(sweep[0]?.[0] as string) ?? [];
    const ours = cost.get(sweep[1]?.[0] as string) ?? [];
    sweepRows.push([
      String(callers),
      formatNumber(median(peerCost), 1),
      formatNumber(median(ours), 1),
      `${medianRatio(ours, peerCost).toFixed(2)}x`,
    ]);
    process.stdout.write(`redis CPU at ${callers} callers done\n`);
  }
  process.stdout.write(
    `\nredis-server CPU time per decision (µs), ${formatNumber(decisions)} decisions per run\n${table(
      ["callers", "rate-limiter-flexible", "edgelimit limiter.check", "ratio"],
      sweepRows,
    )}`,
  );

  // 3. Server time per decision, one caller, one script call per decision.
  const cloudfront = createLimiter({ store: unbatched, policy: loadPolicy(CLOUDFRONT) });
  const ruleOf = (algorithm: "sliding-window" | "token-bucket") =>
    createLimiter({
      store: unbatched,
      policy: definePolicy({
        tiers: { anonymous: { global: { limit: 60, window: "60s", algorithm } } },
      }),
    });
  const sliding = ruleOf("sliding-window");
  const bucket = ruleOf("token-bucket");
  const peer60 = await peer(60);
  const scriptClient = await client();
  await scriptClient.script("LOAD", APPLY_COUNTERS_LUA);
  const previousSha = (await scriptClient.script("LOAD", SPAN_TEXT_LUA)) as string;
  const window = () => Math.floor(Date.now() / 60_000);
  /** envoyproxy/ratelimit's pattern: INCRBY and EXPIRE per counter, one pipeline per decision. */
  const reference = (keys: string[]) => {
    const pipeline = scriptClient.pipeline();
    for (const key of keys) pipeline.incrby(key, 1).expire(key, 60);
    return pipeline.exec();
  };
  const perDecision: [string, Operation][] = [
    ["rate-limiter-flexible RateLimiterRedis (60/min)", (c, i) => peer60.consume(addressFor(c, i))],
    [
      "reference pattern, 1 counter (INCRBY + EXPIRE, pipelined)",
      (c, i) => reference([`ref_${addressFor(c, i)}_${window()}`]),
    ],
    [
      "reference pattern, 2 counters (INCRBY + EXPIRE, pipelined)",
      (c, i) =>
        reference([`ref_${addressFor(c, i)}_${window()}`, `ref_${addressFor(c, i)}_p_${window()}`]),
    ],
    [
      "fixed window, 1 counter (cloudfront.yaml: /)",
      (c, i) => cloudfront.check({ ip: addressFor(c, i), path: "/" }),
    ],
    [
      "fixed window, 2 counters (cloudfront.yaml: /api/search)",
      (c, i) => cloudfront.check({ ip: addressFor(c, i), path: "/api/search" }),
    ],
    [
      "sliding window, 1 counter (60/min)",
      (c, i) => sliding.check({ ip: addressFor(c, i), path: "/" }),
    ],
    [
      "token bucket, 1 counter (60/min)",
      (c, i) => bucket.check({ ip: addressFor(c, i), path: "/" }),
    ],
    [
      // Called directly, as the two rows below: the same client work between calls. A fixed
      // window as the store sent it before fixed windows were counted without the script.
      "fixed window, 1 counter, function (FCALL, f spec: the store before), called directly",
      (c, i) =>
        scriptClient.fcall(
          APPLY_COUNTERS_FUNCTION,
          1,
          `el:{ip:${addressFor(c, i)}}|default|global`,
          "",
          "f 60 60000 1",
        ),
    ],
    [
      "fixed window, 2 counters, function (FCALL, f specs: the store before), called directly",
      (c, i) =>
        scriptClient.fcall(
          APPLY_COUNTERS_FUNCTION,
          2,
          `el:{ip:${addressFor(c, i)}}|default|global`,
          `el:{ip:${addressFor(c, i)}}|default|path`,
          "",
          "f 60 60000 1",
          "f 600 60000 1",
        ),
    ],
    [
      // The same Lua as a script (the store's form where functions are refused), called directly.
      "fixed window, 1 counter, as a script (EVALSHA)",
      (c, i) =>
        scriptClient.evalsha(
          APPLY_COUNTERS_SHA,
          1,
          `el:{ip:${addressFor(c, i)}}|default|global`,
          "",
          "f 60 60000 1",
        ),
    ],
    [
      // The previous version of the Lua (test/redis/previous-scripts.ts), its calling convention.
      "fixed window, 1 counter, previous version (EVALSHA)",
      (c, i) =>
        scriptClient.evalsha(
          previousSha,
          1,
          `el:{ip:${addressFor(c, i)}}|default|global`,
          "1",
          "",
          "1",
          "f",
          "60",
          "60000",
          "1",
          "e",
        ),
    ],
  ];
  const timePerDecision = new Map<string, number[]>(perDecision.map(([name]) => [name, []]));
  const sequential = Number(process.env.BENCH_SEQUENTIAL ?? 5_000);
  for (let round = 0; round < 3; round++) {
    for (const [name, operation] of perDecision) {
      await admin.flushall();
      // Every address once first, so that the measured decisions find their counters (the usual
      // case: a window's first request is one of many).
      await runCallers(1, operation, nodes, { decisions: sequential });
      await admin.config("RESETSTAT");
      await runCallers(1, operation, nodes, { decisions: sequential });
      const { micros } = await serverTime(admin);
      timePerDecision.get(name)?.push(micros / sequential);
    }
  }
  const peerTime = timePerDecision.get(perDecision[0]?.[0] as string) ?? [];
  process.stdout.write(
    `\nRedis server time per decision (INFO commandstats, µs), one caller, one call each\n${table(
      ["decision", "µs", "vs peer"],
      [...timePerDecision].map(([name, values]) => [
        name,
        formatNumber(median(values), 1),
        `${medianRatio(values, peerTime).toFixed(2)}x`,
      ]),
    )}`,
  );
  await Promise.all([unbatched.close(), batched.close()]);
  await admin.flushall();

  // 4. The seed's attack, simulated time: one IP at 800/s against 60/min for 60 s.
  {
    const store = new RedisStore({ client: `redis://127.0.0.1:${port}`, clock: "caller" });
    await store.ready();
    const windowStart = Math.ceil((Date.now() + 86_400_000) / 60_000) * 60_000;
    let now = windowStart;
    const limiter = createLimiter({
      store,
      clock: () => now,
      policy: definePolicy({
        budget: "1s",
        tiers: {
          anonymous: {
            global: { limit: 60, window: "60s", action: "challenge", challengeBand: 2 },
          },
        },
      }),
    });
    let blocked = 0;
    const requests = 800 * 60;
    for (let i = 0; i < requests; i++) {
      now = windowStart + Math.floor((i * 1000) / 800);
      const verdict = await limiter.check({ ip: "203.0.113.66", path: "/api/search" });
      if (verdict.action === "block") blocked++;
    }
    process.stdout.write(
      `\nseed attack (800/s vs 60/min, 60 s simulated): ${requests} requests, ${blocked} blocked, ` +
        `${store.roundTrips} Redis round trips, ${(store.roundTrips / blocked).toFixed(4)} round trips per blocked request\n`,
    );
    await store.close();
  }
  const version = execFileSync("redis-server", ["--version"], { encoding: "utf8" }).split(" ")[2];
  process.stdout.write(
    `\nmachine: ${cpus().length} cores, ${cpus()[0]?.model ?? "unknown CPU"}, node ${process.version}, redis-server ${version}, ${ROUNDS} rounds of ${SECONDS} s per scenario\n`,
  );
} finally {
  for (const made of clients) made.disconnect();
  admin.disconnect();
  await cleanup();
}
