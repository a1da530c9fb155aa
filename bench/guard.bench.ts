/**
 * What the guard (src/http/guard.ts) adds to a decision, on the gateway's path: the seed's
 * policy, the memory store, the challenge mounted, 10,000 clients, every request admitted.
 *
 *   npx tsx bench/guard.bench.ts
 *
 * Contenders, each in its own process, rounds interleaved:
 * - the gateway's path as it was before the guard: the request described inline, the
 *   challenge page's path checked, `limiter.decide`;
 * - the guard as the gateway and the Node middleware run it: `nodeGuard(...).run(req, res)`,
 *   synchronous for the memory store;
 * - `limiter.decide` on a description built once per client (the floor).
 * Requests are plain objects shaped as Node's `IncomingMessage` (socket peer, method, url,
 * lower-case headers), so no socket work is measured. Rates are per second of CPU time. Knobs:
 * BENCH_ROUND_MS (default 1500), BENCH_ROUNDS (default 5).
 */
import { spawnSync } from "node:child_process";
import type { IncomingMessage, ServerResponse } from "node:http";
import { cpus } from "node:os";
import { fileURLToPath } from "node:url";
import { nodeGuard } from "../src/adapters/node-guard.js";
import { createChallenge } from "../src/challenge/index.js";
import { matchesPrefix, normalizePath } from "../src/core/path.js";
import type { Verdict } from "../src/http/respond.js";
import { createLimiter } from "../src/limiter.js";
import { loadPolicy } from "../src/policy/load.js";
import { memoryStore } from "../src/stores/memory.js";

const KEYS = 10_000;
const ROUND_MS = Number(process.env.BENCH_ROUND_MS ?? 1500);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const BATCH = 20_000;

interface Contender {
  readonly name: string;
  run(iterations: number): void | Promise<void>;
}

function setUp() {
  const env = {
    EDGELIMIT_JWT_SECRET: "bench-secret-bench-secret-bench-secret",
    EDGELIMIT_CHALLENGE_SECRET: "bench-challenge-secret-bench-challenge",
  };
  const policy = loadPolicy(
    new URL("../examples/policies/cloudfront.yaml", import.meta.url).pathname,
  );
  // The seed's limits, raised so that the benchmark measures admitted requests.
  const raised = {
    ...policy,
    rules: policy.rules.map((rule) => ({ ...rule, limit: 1_000_000_000 })),
  };
  const challenge = createChallenge(raised, { env });
  if (challenge === undefined) throw new Error("the seed's policy challenges");
  const limiter = createLimiter({
    policy: raised,
    store: memoryStore(),
    env,
    passes: challenge.passes,
  });
  // Behind a proxy on loopback, as the gateway bench sends them: the client in X-Forwarded-For.
  const requests = Array.from({ length: KEYS }, (_, i) => ({
    socket: { remoteAddress: "127.0.0.1" },
    method: "GET",
    url: "/api/search?q=shoes",
    headers: {
      host: "shop.example",
      "x-forwarded-for": `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`,
    },
  })) as unknown as IncomingMessage[];
  return { limiter, challenge, requests };
}

function admitted(verdict: Verdict | undefined): void {
  if (verdict?.action !== "allow") throw new Error(`refused: ${verdict?.reason}`);
}

function beforeTheGuard(): Contender {
  const { limiter, challenge, requests } = setUp();
  let i = 0;
  return {
    name: "the gateway's path before the guard (inline description, page check, decide)",
    async run(iterations) {
      for (let n = 0; n < iterations; n++) {
        const req = requests[i++ % KEYS] as IncomingMessage;
        const description = {
          ip: req.socket.remoteAddress,
          method: req.method,
          path: req.url ?? "/",
          headers: req.headers,
          lowerCaseHeaders: true,
        };
        if (matchesPrefix(normalizePath(description.path), challenge.path)) {
          throw new Error("not the page");
        }
        const decided = limiter.decide(description);
        admitted(decided instanceof Promise ? await decided : decided);
      }
    },
  };
}

function theGuard(): Contender {
  const { limiter, challenge, requests } = setUp();
  const guard = nodeGuard("bench", limiter, { challenge });
  const response = {} as ServerResponse;
  let i = 0;
  return {
    name: "the guard (nodeGuard.run, as the gateway runs it)",
    async run(iterations) {
      for (let n = 0; n < iterations; n++) {
        const guarded = guard.run(requests[i++ % KEYS] as IncomingMessage, response);
        const action = guarded instanceof Promise ? await guarded : guarded;
        admitted(action.kind === "forward" ? action.verdict : undefined);
      }
    },
  };
}

function decideOnly(): Contender {
  const { limiter, requests } = setUp();
  const descriptions = requests.map((req) => ({
    ip: req.socket.remoteAddress,
    method: req.method,
    path: req.url ?? "/",
    headers: req.headers,
    lowerCaseHeaders: true,
  }));
  let i = 0;
  return {
    name: "limiter.decide on prepared descriptions (floor)",
    async run(iterations) {
      for (let n = 0; n < iterations; n++) {
        const decided = limiter.decide(descriptions[i++ % KEYS] as (typeof descriptions)[number]);
        admitted(decided instanceof Promise ? await decided : decided);
      }
    },
  };
}

const builders = [beforeTheGuard, theGuard, decideOnly];

/**
 * Decisions per second of the process's own CPU time (user + system), not of the wall clock:
 * on a machine shared with other jobs, time spent waiting for a core is not the contender's.
 */
async function measure(contender: Contender): Promise<number> {
  await contender.run(KEYS * 3);
  const started = performance.now();
  const cpu = process.cpuUsage();
  let done = 0;
  while (performance.now() - started < ROUND_MS) {
    await contender.run(BATCH);
    done += BATCH;
  }
  const used = process.cpuUsage(cpu);
  return done / ((used.user + used.system) / 1e6);
}

const child = process.env.BENCH_CONTENDER;
if (child !== undefined) {
  const contender = builders.map((build) => build()).find((c) => c.name === child);
  if (contender === undefined) throw new Error(`unknown contender ${child}`);
  process.stdout.write(`${await measure(contender)}\n`);
  process.exit(0);
}

// Each contender in its own process, rounds interleaved (reversed every other round), so that
// load from other jobs falls on all of them; ratios are medians of per-round ratios.
const names = builders.map((build) => build().name);
const results = new Map<string, number[]>(names.map((name) => [name, []]));
for (let round = 0; round < ROUNDS; round++) {
  for (const name of round % 2 === 0 ? names : [...names].reverse()) {
    const run = spawnSync(process.execPath, ["--import", "tsx", fileURLToPath(import.meta.url)], {
      env: { ...process.env, BENCH_CONTENDER: name },
      encoding: "utf8",
    });
    if (run.status !== 0) throw new Error(`${name} failed: ${run.stderr}`);
    results.get(name)?.push(Number(run.stdout.trim()));
  }
}

const median = (values: readonly number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
};
const rates = (name: string) => results.get(name) ?? [];
const [before, guarded, floor] = names as [string, string, string];
const perRound = (a: string, b: string) =>
  median(rates(a).map((rate, round) => rate / (rates(b)[round] as number)));

console.log(`machine: ${cpus().length} cores, ${cpus()[0]?.model}, node ${process.version}`);
console.log(
  `${KEYS} clients, ${ROUNDS} interleaved rounds of ${ROUND_MS} ms, each contender in its own process; median decisions per CPU second:\n`,
);
console.log("| contender | decisions/s | by round (k/s) |");
console.log("|---|---:|---|");
for (const name of names) {
  const byRound = rates(name).map((rate) => (rate / 1e3).toFixed(0));
  console.log(`| ${name} | ${(median(rates(name)) / 1e3).toFixed(0)} k | ${byRound.join(", ")} |`);
}
console.log(
  `\nthe guard against the path before it: ${perRound(guarded, before).toFixed(3)}x the decisions/s (median of per-round ratios); against the floor: ${perRound(guarded, floor).toFixed(3)}x`,
);
