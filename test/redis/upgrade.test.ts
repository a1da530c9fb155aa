/**
 * Counters written by the two previous versions of the Redis store's Lua (test/redis/
 * previous-scripts.ts, verbatim from git) and read by the current one: after an upgrade in
 * place, and while processes of both versions share one Redis during a rolling upgrade.
 */
import fc from "fast-check";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AlgorithmName, CounterSpec, CounterState, WindowSpec } from "../../src/core/types.js";
import { windowIndexAt } from "../../src/core/windows.js";
import { decodeReply, encodeRequest } from "../../src/stores/redis/encoding.js";
import { windowKeyOf } from "../../src/stores/redis/fixed-windows.js";
import { APPLY_COUNTERS_FUNCTION, APPLY_COUNTERS_LIBRARY } from "../../src/stores/redis.js";
import { SPAN_TEXT_LUA, TEXT_LUA } from "./previous-scripts.js";
import { type RedisServer, startRedis } from "./redis-server.js";
import { AlgorithmReference, counter, plain } from "./reference.js";

let server: RedisServer;
let cleanup: () => Promise<void>;
let redis: Redis;

beforeAll(async () => {
  ({ server, cleanup } = await startRedis());
  redis = new Redis({ port: server.port, host: "127.0.0.1" });
  await redis.function("LOAD", "REPLACE", APPLY_COUNTERS_LIBRARY);
});

afterAll(async () => {
  redis?.disconnect();
  await cleanup?.();
});

type Version = "current" | "span-text" | "text";

const keyOf = (spec: CounterSpec) => `upgrade:{${spec.subject}}|${spec.key}`;

/**
 * One request through one version's Lua, with the caller's clock. The call and a PERSIST of its
 * keys run in one MULTI: the test's clock runs far ahead of the real one, and no key may expire
 * in real time before the next step reads it.
 */
async function apply(
  version: Version,
  counters: CounterSpec[],
  now: number,
): Promise<CounterState[]> {
  const keys = counters.map(keyOf);
  // This version counts a fixed window in its window's key, beside the counter's.
  const touched = [...keys];
  if (version === "current") {
    for (const spec of counters) {
      if (spec.algorithm === "fixed-window") {
        touched.push(windowKeyOf(keyOf(spec), spec, windowIndexAt(spec.window, now)));
      }
    }
  }
  const transaction = redis.multi();
  if (version === "current") {
    const { args } = encodeRequest(counters, String(now), keyOf);
    transaction.fcall(APPLY_COUNTERS_FUNCTION, keys.length, ...keys, ...args);
  } else {
    // The previous calling convention: five arguments per counter.
    const specs = counters.flatMap((spec) => [
      { "fixed-window": "f", "sliding-window": "s", "token-bucket": "t" }[spec.algorithm],
      String(spec.limit),
      "ms" in spec.window ? String(spec.window.ms) : `m${spec.window.months}`,
      String(spec.cost),
      spec.mode === "observe" ? "o" : "e",
    ]);
    const lua = version === "span-text" ? SPAN_TEXT_LUA : TEXT_LUA;
    transaction.eval(
      lua,
      keys.length,
      ...keys,
      "1",
      String(now),
      String(counters.length),
      ...specs,
    );
  }
  for (const key of touched) transaction.persist(key);
  const [[error, reply] = [new Error("no reply")]] = (await transaction.exec()) ?? [];
  if (error) throw error;
  return decodeReply(reply, 0, counters.length);
}

const shape = fc.record({
  algorithm: fc.constantFrom<AlgorithmName>("fixed-window", "sliding-window", "token-bucket"),
  limit: fc.integer({ min: 1, max: 12 }),
  window: fc.constantFrom<WindowSpec>({ ms: 1_000 }, { ms: 60_000 }, { months: 1 }),
  observe: fc.boolean(),
});
const step = fc.record({
  advanceMs: fc.oneof(fc.integer({ min: 0, max: 2_000 }), fc.integer({ min: 0, max: 90_000 })),
  lateMs: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 90_000 })),
  mask: fc.integer({ min: 1, max: 7 }),
  cost: fc.integer({ min: 1, max: 3 }),
  /** A reload that gives counter `counter` another window (same algorithm: see below). */
  reload: fc.option(
    fc.record({
      counter: fc.integer({ min: 0, max: 2 }),
      window: fc.constantFrom<WindowSpec>({ ms: 1_000 }, { ms: 60_000 }, { months: 1 }),
    }),
    { freq: 6 },
  ),
});

interface Step {
  readonly advanceMs: number;
  readonly lateMs: number;
  readonly mask: number;
  readonly cost: number;
  readonly reload: { readonly counter: number; readonly window: WindowSpec } | null;
}

/**
 * Random requests through `before`, then through the current version, every answer compared
 * with the algorithms. `before` gets the steps it handled as the current version does: the
 * version before the previous one counted late requests in their own window and recorded no
 * window length, so its steps come in order and without reloads. Neither previous version told
 * one windowed algorithm's state from the other's, so no reload changes an algorithm.
 */
async function upgradeProperty(before: "span-text" | "text"): Promise<void> {
  let run = 0;
  await fc.assert(
    fc.asyncProperty(
      fc.array(shape, { minLength: 3, maxLength: 3 }),
      fc.array(step, { minLength: 1, maxLength: 20 }),
      fc.array(step, { minLength: 1, maxLength: 20 }),
      async (shapes, stepsBefore, stepsAfter) => {
        run++;
        const reference = new AlgorithmReference();
        const subject = `user:${before}${run}`;
        const windows = shapes.map((each) => each.window);
        // A day ahead of the real clock: the oldest version writes absolute expiries (PXAT).
        let now = Date.now() + 86_400_000 + run * 1_000;
        const go = async (version: Version, { advanceMs, lateMs, mask, cost, reload }: Step) => {
          const inOrder = version === "text";
          // Earlier versions counted a fixed window in the counter's own key; this one in a key
          // per window, which starts empty after the upgrade (see docs/redis.md, "Upgrading").
          reference.keyedFixedWindows = version === "current";
          now += advanceMs;
          if (reload !== null && !inOrder) windows[reload.counter] = reload.window;
          const stamp = inOrder ? now : now - lateMs;
          const counters = shapes
            .map((each, index) =>
              counter(
                subject,
                `c${index}`,
                each.algorithm,
                each.limit,
                windows[index] as WindowSpec,
                cost,
                each.observe ? "observe" : "enforce",
              ),
            )
            .filter((_, index) => (mask & (1 << index)) !== 0);
          const fromRedis = await apply(version, counters, stamp);
          expect(plain(fromRedis)).toEqual(plain(reference.apply(counters, stamp)));
        };
        for (const each of stepsBefore) await go(before, each);
        if (before === "text") reference.forgetSpans();
        for (const each of stepsAfter) await go("current", each);
      },
    ),
    { numRuns: 40, seed: 20_261_201 },
  );
}

describe("an upgrade in place", () => {
  it('reads counters the previous version wrote ("index count previous span" as text)', async () => {
    await upgradeProperty("span-text");
  });

  it('reads counters the version before it wrote ("index count previous" as text)', async () => {
    await upgradeProperty("text");
  });
});

describe("a rolling upgrade, both versions on one Redis", () => {
  const WINDOW = { ms: 60_000 };
  /** The start of a minute, a day ahead of the real clock. */
  const minute = () => Math.ceil((Date.now() + 86_400_000) / 60_000) * 60_000;

  it("counts every request of a window the previous version opened, whichever version serves it", async () => {
    for (const algorithm of ["sliding-window", "token-bucket"] as const) {
      const spec = counter(`ip:rolling-${algorithm}`, "global", algorithm, 100, WINDOW, 1);
      const start = minute();
      const versions: Version[] = ["span-text", "current", "current", "span-text", "current"];
      const counts: number[] = [];
      for (const [index, version] of versions.entries()) {
        const [state] = await apply(version, [spec], start + index);
        counts.push(state?.count ?? Number.NaN);
      }
      // The token bucket counts units in use: each request takes one, a millisecond refills
      // 100/60000 of one, which rounds up.
      expect(counts).toEqual([1, 2, 3, 4, 5]);
      // The current version kept the text its predecessor reads.
      expect(String(await redis.get(keyOf(spec)))).toMatch(/^[0-9]/);
    }
  });

  it("counts a fixed window in each version's own keys, so a window admits at most twice its limit", async () => {
    const spec = counter("ip:rolling-fixed", "global", "fixed-window", 3, WINDOW, 1);
    const start = minute();
    let admitted = 0;
    for (let i = 0; i < 12; i++) {
      const [state] = await apply(i % 2 === 0 ? "span-text" : "current", [spec], start + i);
      if (state?.allowed) admitted++;
    }
    expect(admitted).toBe(6);
    // Once every process runs this version, one count: the window's key.
    const [after] = await apply("current", [{ ...spec, cost: 0 }], start + 20);
    expect(after?.count).toBe(6);
  });

  it("restarts a window the current version opened at the previous version's first request, and no more", async () => {
    const spec = counter("ip:rolling-restart", "global", "sliding-window", 100, WINDOW, 1);
    const start = minute();
    const served: [Version, number][] = [
      ["current", 1],
      ["current", 2],
      // Bytes: the previous version reads no counter, and starts the window again.
      ["span-text", 1],
      // From then on, text both ways.
      ["current", 2],
      ["span-text", 3],
      ["current", 4],
    ];
    for (const [index, [version, expected]] of served.entries()) {
      const [state] = await apply(version, [spec], start + index);
      expect({ index, count: state?.count }).toEqual({ index, count: expected });
    }
    // The next window, opened by the current version, is written as bytes.
    await apply("current", [spec], start + 60_000);
    expect((await redis.getBuffer(keyOf(spec)))?.toString("latin1", 0, 1)).toBe("s");
  });
});
