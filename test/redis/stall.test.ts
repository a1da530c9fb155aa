/**
 * A genuinely stalled Redis: redis-server stopped with SIGSTOP keeps its connections open and
 * reads nothing, so no error ever arrives; only the decision budget can answer. (failure.test.ts
 * covers a Redis that is killed, whose connection resets at once, with a 150 ms budget and
 * slack; here the budget is the example policy's default, 50 ms, and the bound is tight.)
 *
 * Decision time is measured by the caller, with performance.now() around `limiter.check()`:
 * that is what a request waits, late timers and the continuation included, at sub-millisecond
 * resolution. verdict.durationMs comes from the limiter's epoch clock (whole milliseconds) and
 * stops before the caller's continuation runs, so it could only understate the wait.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Verdict } from "../../src/http/respond.js";
import { createLimiter } from "../../src/limiter.js";
import { loadPolicy } from "../../src/policy/load.js";
import { type RedisStore, redisStoreFromUrl } from "../../src/stores/redis.js";
import { CLOUDFRONT_POLICY } from "../support/burst.js";
import { type RedisServer, startRedis } from "./redis-server.js";

/** The example policy sets no budget: the default. */
const BUDGET_MS = 50;
const SLACK_MS = 20;
/** Longer than the store's 1 s command timeout, so that the breaker opens during the stall. */
const STALL_MS = 1500;
const LOOPS = 8;
/** The event-loop probe's period. */
const PROBE_MS = 5;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let server: RedisServer;
let cleanup: () => Promise<void>;
let store: RedisStore;

beforeAll(async () => {
  ({ server, cleanup } = await startRedis());
  store = redisStoreFromUrl(server.url);
  await store.ready();
});

afterAll(async () => {
  // A stopped redis-server would only take SIGTERM once continued.
  if (server?.pid !== undefined) process.kill(server.pid, "SIGCONT");
  await store?.close();
  await cleanup?.();
});

describe("Redis stalled with SIGSTOP, then continued", () => {
  it("answers within the budget (counted locally, fail-closed 503) and counts exactly within 1 s of SIGCONT", async () => {
    expect(loadPolicy(CLOUDFRONT_POLICY).budgetMs).toBe(BUDGET_MS);
    const limiter = createLimiter({
      policy: loadPolicy(CLOUDFRONT_POLICY),
      store,
      env: { EDGELIMIT_JWT_SECRET: "stall-test-secret-0123456789abcdef" },
    });
    interface Sample {
      readonly startedAt: number;
      readonly tookMs: number;
      readonly path: string;
      readonly verdict: Verdict;
    }
    const samples: Sample[] = [];
    // The event loop's lateness through the run: each tick of a PROBE_MS timer, when it fired
    // and how late.
    const ticks: { at: number; lateMs: number }[] = [];
    let lastTick = performance.now();
    const probe = setInterval(() => {
      const now = performance.now();
      ticks.push({ at: now, lateMs: Math.max(0, now - lastTick - PROBE_MS) });
      lastTick = now;
    }, PROBE_MS);
    const lagDuring = (sample: Sample): number =>
      ticks
        .filter(
          (tick) =>
            tick.at >= sample.startedAt && tick.at <= sample.startedAt + sample.tookMs + PROBE_MS,
        )
        .reduce((worst, tick) => Math.max(worst, tick.lateMs), 0);
    let running = true;
    let sequence = 0;
    // Every request from an address of its own: no limit is reached, every verdict is the
    // store's (or the budget's) and never the block cache's.
    const loop = async (): Promise<void> => {
      while (running) {
        const n = sequence++;
        const path = n % 2 === 0 ? "/api/items" : "/api/admin/users";
        const ip = `10.16.${(n >> 8) & 255}.${n & 255}`;
        const startedAt = performance.now();
        const verdict = await limiter.check({ ip, path, method: "GET", headers: {} });
        samples.push({ startedAt, tookMs: performance.now() - startedAt, path, verdict });
        await sleep(2);
      }
    };
    const loops = Array.from({ length: LOOPS }, loop);

    await sleep(300);
    const stoppedAt = performance.now();
    process.kill(server.pid as number, "SIGSTOP");
    await sleep(STALL_MS);
    const continuedAt = performance.now();
    process.kill(server.pid as number, "SIGCONT");
    let resumedAt: number | undefined;
    while (resumedAt === undefined && performance.now() - continuedAt < 3000) {
      const counted = samples.find(
        (sample) => sample.startedAt >= continuedAt && sample.verdict.reason === "within-limit",
      );
      if (counted !== undefined) resumedAt = counted.startedAt + counted.tookMs;
      else await sleep(5);
    }
    // Counting, not just answering, while the other callers go on: a fresh client gets exactly
    // /api/export's 3 of 10.
    const exports = await Promise.all(
      Array.from({ length: 10 }, () =>
        limiter.check({ ip: "10.17.0.1", path: "/api/export", method: "GET", headers: {} }),
      ),
    );
    const exactAt = performance.now();
    running = false;
    await Promise.all(loops);
    clearInterval(probe);

    const before = samples.filter((sample) => sample.startedAt + sample.tookMs < stoppedAt);
    // Decisions that started after the stop and ended before the continue saw no Redis at all.
    const stalled = samples.filter(
      (sample) => sample.startedAt > stoppedAt && sample.startedAt + sample.tookMs < continuedAt,
    );
    const stalledBy = (path: string) => stalled.filter((sample) => sample.path === path);
    expect(before.length).toBeGreaterThan(20);
    expect(before.every((sample) => sample.verdict.reason === "within-limit")).toBe(true);
    expect(stalledBy("/api/items").length).toBeGreaterThan(20);
    expect(stalledBy("/api/admin/users").length).toBeGreaterThan(20);
    expect(
      new Set(stalledBy("/api/items").map(({ verdict }) => `${verdict.action} ${verdict.reason}`)),
    ).toEqual(new Set(["allow store-failed-local"]));
    expect(
      new Set(
        stalledBy("/api/admin/users").map(({ verdict }) => `${verdict.status} ${verdict.reason}`),
      ),
    ).toEqual(new Set(["503 store-failed-closed"]));
    // Every decision, stalled or not, within the budget plus 20 ms, less the time this process
    // was not run at all (the event loop's lateness meanwhile, which the budget does not charge
    // to the store either: core/deadline.ts). On a loaded 2-core CI machine the loop itself runs
    // late by more than the slack.
    const waited = (sample: Sample) => sample.tookMs - lagDuring(sample);
    const slowest = samples.reduce((a, b) => (waited(b) > waited(a) ? b : a));
    const phase = (sample: Sample) =>
      sample.startedAt < stoppedAt
        ? "before the stop"
        : sample.startedAt < continuedAt
          ? `${Math.round(sample.startedAt - stoppedAt)} ms into the stall`
          : `${Math.round(sample.startedAt - continuedAt)} ms after SIGCONT`;
    expect(
      waited(slowest),
      `slowest: ${slowest.path}, ${slowest.verdict.reason}, started ${phase(slowest)}, took ${slowest.tookMs.toFixed(1)} ms with the loop ${lagDuring(slowest).toFixed(1)} ms late`,
    ).toBeLessThan(BUDGET_MS + SLACK_MS);

    expect(resumedAt).toBeDefined();
    expect((resumedAt as number) - continuedAt).toBeLessThan(1000);
    expect({
      counted: exports.filter((verdict) => verdict.reason === "within-limit").length,
      blocked: exports.filter((verdict) => verdict.action === "block").length,
    }).toEqual({ counted: 3, blocked: 7 });
    expect(exactAt - continuedAt).toBeLessThan(1000);
  }, 30_000);
});
