import { createHash } from "node:crypto";
import fc from "fast-check";
import { Cluster, Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AlgorithmName, CounterSpec, CounterState, WindowSpec } from "../../src/core/types.js";
import { LATE_GRACE_MS, windowIndexAt } from "../../src/core/windows.js";
import { MemoryStore } from "../../src/stores/memory.js";
import { decodeReply, encodeRequest } from "../../src/stores/redis/encoding.js";
import { windowKeyOf } from "../../src/stores/redis/fixed-windows.js";
import {
  APPLY_COUNTERS_FUNCTION,
  APPLY_COUNTERS_LIBRARY,
  APPLY_COUNTERS_LUA,
  APPLY_COUNTERS_SHA,
  createRedisClient,
  RedisStore,
} from "../../src/stores/redis.js";
import { withinOneWindow } from "../support/windows.js";
import { type RedisServer, startRedis } from "./redis-server.js";
import { AlgorithmReference, counter, plain } from "./reference.js";

let server: RedisServer;
let cleanup: () => Promise<void>;
let admin: Redis;

beforeAll(async () => {
  ({ server, cleanup } = await startRedis());
  admin = new Redis({ port: server.port, host: "127.0.0.1" });
});

afterAll(async () => {
  admin?.disconnect();
  await cleanup?.();
});

/** A real redis-server that refuses functions, as Redis before 7 (or a proxy) does. */
let scriptsOnly: RedisServer;
let scriptsOnlyCleanup: () => Promise<void>;

beforeAll(async () => {
  ({ server: scriptsOnly, cleanup: scriptsOnlyCleanup } = await startRedis([
    "--rename-command",
    "FCALL",
    "",
    "--rename-command",
    "FUNCTION",
    "",
  ]));
});

afterAll(async () => {
  await scriptsOnlyCleanup?.();
});

async function until(condition: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 2000;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`${what} within 2 s`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** Calls of each kind the server has run since its last `CONFIG RESETSTAT`. */
async function scriptCalls(
  client: Redis,
): Promise<{ fcall: number; evalsha: number; eval: number }> {
  const info = await client.info("commandstats");
  const calls = (name: string) =>
    Number(new RegExp(`^cmdstat_${name}:calls=(\\d+)`, "m").exec(info)?.[1] ?? 0);
  return { fcall: calls("fcall"), evalsha: calls("evalsha"), eval: calls("eval") };
}

async function libraryLoaded(client: Redis): Promise<boolean> {
  const libraries = (await client.function(
    "LIST",
    "LIBRARYNAME",
    APPLY_COUNTERS_FUNCTION,
  )) as unknown[];
  return libraries.length === 1;
}

describe("the apply-counters script", () => {
  it("has the SHA1 that SCRIPT LOAD reports, and its library registers the function named for it", async () => {
    const loaded = await admin.script("LOAD", APPLY_COUNTERS_LUA);
    expect(loaded).toBe(APPLY_COUNTERS_SHA);
    expect(createHash("sha1").update(APPLY_COUNTERS_LUA).digest("hex")).toBe(APPLY_COUNTERS_SHA);
    expect(APPLY_COUNTERS_FUNCTION).toBe(`edgelimit_apply_${APPLY_COUNTERS_SHA.slice(0, 16)}`);
    await admin.function("LOAD", "REPLACE", APPLY_COUNTERS_LIBRARY);
    const [library] = (await admin.function(
      "LIST",
      "LIBRARYNAME",
      APPLY_COUNTERS_FUNCTION,
    )) as unknown[][];
    expect(library).toContain(APPLY_COUNTERS_FUNCTION);
    expect(JSON.stringify(library)).toContain(`"name","${APPLY_COUNTERS_FUNCTION}"`);
  });

  it("after FUNCTION FLUSH decides by EVAL, loads the library again, then calls the function", async () => {
    const store = new RedisStore({ client: server.url, prefix: "nofunction:" });
    await store.ready();
    try {
      await admin.function("FLUSH");
      await admin.config("RESETSTAT");
      // A sliding window: fixed windows alone are counted without the function.
      const spec = [counter("ip:198.51.100.1", "global", "sliding-window", 5, { ms: 60_000 })];
      const first = await store.apply(spec, Date.now());
      expect(first[0]?.count).toBe(1);
      // FCALL, then EVAL.
      expect(store.roundTrips).toBe(2);
      await until(() => libraryLoaded(admin), "the library was not loaded again");
      const second = await store.apply(spec, Date.now());
      expect(second[0]?.count).toBe(2);
      expect(store.roundTrips).toBe(3);
      expect(await scriptCalls(admin)).toEqual({ fcall: 2, evalsha: 0, eval: 1 });
    } finally {
      await store.close();
    }
  });

  it("runs as a script where the server refuses functions, and falls back to EVAL after SCRIPT FLUSH", async () => {
    const store = new RedisStore({ client: scriptsOnly.url, prefix: "noscript:" });
    const direct = new Redis({ port: scriptsOnly.port, host: "127.0.0.1" });
    await store.ready();
    try {
      await direct.script("FLUSH");
      await direct.config("RESETSTAT");
      // A fixed minute on the server's clock: the second count needs the first's minute.
      await withinOneWindow(60_000, 2_000);
      const spec = [counter("ip:198.51.100.1", "global", "fixed-window", 5, { ms: 60_000 })];
      const first = await store.apply(spec, Date.now());
      expect(first[0]?.count).toBe(1);
      // EVALSHA, then EVAL.
      expect(store.roundTrips).toBe(2);
      const second = await store.apply(spec, Date.now());
      expect(second[0]?.count).toBe(2);
      expect(store.roundTrips).toBe(3);
      expect(await scriptCalls(direct)).toEqual({ fcall: 0, evalsha: 2, eval: 1 });
    } finally {
      direct.disconnect();
      await store.close();
    }
  });

  it("loads the library again after every reconnection, before traffic needs it", async () => {
    const store = new RedisStore({ client: server.url, prefix: "reload:" });
    await store.ready();
    try {
      await admin.function("FLUSH");
      const reconnected = new Promise((resolve) => store.client.once("ready", resolve));
      store.client.disconnect(true);
      await reconnected;
      await until(() => libraryLoaded(admin), "the library was not loaded after reconnecting");
      const spec = [counter("ip:198.51.100.2", "global", "sliding-window", 5, { ms: 60_000 })];
      await store.apply(spec, Date.now());
      expect(store.roundTrips).toBe(1);
    } finally {
      await store.close();
    }
  });

  for (const flush of ["FUNCTION", "SCRIPT"] as const) {
    it(`${flush} FLUSH under load loses no decision and counts every request once`, async () => {
      // The caller's clock, held still: the token bucket's count does not drain meanwhile.
      // Small batches, so that several calls are in flight when the flush lands.
      const store = new RedisStore({
        client: flush === "FUNCTION" ? server.url : scriptsOnly.url,
        prefix: `flush-${flush}:`,
        clock: "caller",
        maxBatch: 4,
      });
      const direct = new Redis({
        port: flush === "FUNCTION" ? server.port : scriptsOnly.port,
        host: "127.0.0.1",
      });
      await store.ready();
      await direct.config("RESETSTAT");
      const now = Date.now();
      try {
        const subjects = ["ip:203.0.113.1", "ip:203.0.113.2", "ip:203.0.113.3"];
        const request = (subject: string) => [
          counter(subject, "global", "fixed-window", 1_000_000, { ms: 86_400_000 }),
          counter(subject, "search", "sliding-window", 1_000_000, { ms: 86_400_000 }),
          counter(subject, "burst", "token-bucket", 1_000_000, { ms: 86_400_000 }),
        ];
        const burst = (count: number) =>
          Array.from({ length: count }, (_, index) =>
            store.apply(request(subjects[index % subjects.length] as string), now),
          );
        const waves = 10;
        const perWave = 60;
        for (let wave = 0; wave < waves; wave++) {
          const before = burst(perWave / 2);
          // The first half is on the wire; the flush lands among it and the second half.
          await new Promise((resolve) => setImmediate(resolve));
          const flushed = direct.call(flush, "FLUSH");
          const after = burst(perWave / 2);
          await flushed;
          const settled = await Promise.allSettled([...before, ...after]);
          expect(settled.filter((result) => result.status === "rejected")).toEqual([]);
        }
        // Every request was counted once on each of its counters.
        for (const subject of subjects) {
          const read = request(subject).map((spec) => ({ ...spec, cost: 0 }));
          const states = await store.apply(read, now);
          const expected = (waves * perWave) / subjects.length;
          expect(states.map((state) => state.count)).toEqual([expected, expected, expected]);
        }
        // Some calls found the code gone and were decided by EVAL.
        const calls = await scriptCalls(direct);
        expect(calls.eval).toBeGreaterThan(0);
        expect(calls.fcall + calls.evalsha).toBeGreaterThan(calls.eval);
      } finally {
        direct.disconnect();
        await store.close();
      }
    });
  }

  it("stores each counter under its subject's hash tag and expires it with the window, and the late grace", async () => {
    const store = new RedisStore({ client: server.url, prefix: "layout:" });
    await store.ready();
    try {
      const spec = counter("ip:203.0.113.9", "global", "sliding-window", 5, { ms: 30_000 });
      await store.apply([spec], Date.now());
      const key = "layout:{ip:203.0.113.9}|api|global";
      expect(store.redisKey(spec)).toBe(key);
      // A sliding window's count matters until the end of the next window.
      const expireAt = await admin.pexpiretime(key);
      const serverNow = Number((await admin.time())[0]) * 1000;
      // The window's end, and LATE_GRACE_MS for a request that arrives late. The script writes
      // the expiry as a duration from the TIME it read (PX); Redis adds it to the time its
      // command started, which may be a millisecond off TIME's reading (seen in CI: 2001).
      expect(Math.abs((expireAt % 30_000) - LATE_GRACE_MS)).toBeLessThanOrEqual(1);
      expect(expireAt).toBeGreaterThan(serverNow);
      expect(expireAt).toBeLessThanOrEqual(serverNow + 60_000 + LATE_GRACE_MS + 1000);
      // A fixed window counts in a key of its own per window, in the same slot.
      const fixed = counter("ip:203.0.113.9", "minute", "fixed-window", 5, { ms: 60_000 });
      await store.apply([fixed], Date.now());
      const [windowKey, ...others] = await admin.keys("layout:*|w*");
      expect(others).toEqual([]);
      const index = Number(windowKey?.split(":").pop());
      expect(windowKey).toBe(`layout:{ip:203.0.113.9}|api|minute|w60000:${index}`);
      expect(Math.abs(index - windowIndexAt({ ms: 60_000 }, serverNow))).toBeLessThanOrEqual(1);
      expect(await admin.get(windowKey as string)).toBe("1");
      // Its expiry is a duration from the server's time as the store estimated it when it sent
      // the call: later than the window's end and the grace by the way there (a loaded machine).
      const late =
        (await admin.pexpiretime(windowKey as string)) - ((index + 1) * 60_000 + LATE_GRACE_MS);
      expect(late).toBeGreaterThanOrEqual(-5);
      expect(late).toBeLessThanOrEqual(500);
    } finally {
      await store.close();
    }
  });

  it("reads the time from the Redis server, not from the caller", async () => {
    const store = new RedisStore({ client: server.url, prefix: "servertime:" });
    await store.ready();
    try {
      const spec = [counter("ip:192.0.2.1", "global", "fixed-window", 1, { ms: 3_600_000 })];
      // A caller ten hours fast must not land in another window: the server's clock decides.
      const skewed = Date.now() + 10 * 3_600_000;
      const [state] = await store.apply(spec, skewed);
      const serverNow = Number((await admin.time())[0]) * 1000;
      expect(state?.resetAt).toBe(Math.floor(serverNow / 3_600_000) * 3_600_000 + 3_600_000);
    } finally {
      await store.close();
    }
  });

  it("applies the same three phases as the memory store (refused requests count only where refused)", async () => {
    const store = new RedisStore({ client: server.url, prefix: "phases:", clock: "caller" });
    await store.ready();
    const memory = new MemoryStore();
    try {
      const now = Date.now() + 86_400_000;
      const subject = "user:u_1";
      const request = [
        counter(subject, "tight", "fixed-window", 2, { ms: 60_000 }),
        counter(subject, "loose", "token-bucket", 100, { ms: 60_000 }),
        counter(subject, "shadow", "sliding-window", 1, { ms: 60_000 }, 1, "observe"),
      ];
      for (let i = 0; i < 4; i++) {
        expect(plain(await store.apply(request, now + i))).toEqual(
          plain(memory.applySync(request, now + i)),
        );
      }
      const [tight, loose, shadow] = await store.apply(request, now + 10);
      expect(tight).toMatchObject({ allowed: false, count: 5 });
      // The token bucket never paid for the two refused requests.
      expect(loose).toMatchObject({ allowed: true, count: 2 });
      expect(shadow).toMatchObject({ allowed: false, count: 5 });
    } finally {
      await store.close();
    }
  });
});

const windows: fc.Arbitrary<WindowSpec> = fc.oneof(
  fc.constantFrom<WindowSpec>({ ms: 1_000 }, { ms: 7_000 }, { ms: 60_000 }, { ms: 86_400_000 }),
  fc.constantFrom<WindowSpec>({ months: 1 }, { months: 3 }),
);

const algorithms = fc.constantFrom<AlgorithmName>("fixed-window", "sliding-window", "token-bucket");

const counterShape = fc.record({
  algorithm: algorithms,
  limit: fc.integer({ min: 0, max: 12 }),
  window: windows,
  observe: fc.boolean(),
});

/** One request of a call: which counters, at what cost, stamped how late. */
const requestShape = fc.record({
  mask: fc.integer({ min: 1, max: 7 }),
  cost: fc.integer({ min: 0, max: 3 }),
  lateMs: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 90_000 })),
});

const step = fc.record({
  advanceMs: fc.oneof(
    fc.integer({ min: 0, max: 400 }),
    fc.integer({ min: 0, max: 90_000 }),
    fc.integer({ min: 0, max: 40 * 86_400_000 }),
  ),
  /** A policy reload: counter `counter` gets another rule (same key). */
  reload: fc.option(fc.record({ counter: fc.integer({ min: 0, max: 2 }), shape: counterShape }), {
    freq: 8,
  }),
  /** Requests sent in one call, as the store batches a tick's requests. */
  requests: fc.array(requestShape, { minLength: 1, maxLength: 3 }),
});

type Form = "function" | "script";

/**
 * Runs requests through the Lua directly, the way the store sends them (encodeRequest,
 * decodeReply), as a function or as a script. The call and a PERSIST of every key it touched
 * run in one MULTI: the test's clock runs far ahead of the real one, and a key written a
 * millisecond before its window ends must not expire, in real time, before the next step reads
 * it (the memory store it is compared with never expires anything on its own).
 */
async function runDirect(
  form: Form,
  requests: readonly { counters: CounterSpec[]; now: number }[],
): Promise<CounterState[][]> {
  const keys: string[] = [];
  const args: string[] = [];
  const touched: string[] = [];
  for (const { counters, now } of requests) {
    const encoded = encodeRequest(
      counters,
      String(now),
      (spec) => `parity:{${spec.subject}}|${spec.key}`,
    );
    keys.push(...encoded.keys);
    args.push(...encoded.args);
    // A fixed window counts in its window's key, beside the counter's.
    counters.forEach((spec, i) => {
      const key = encoded.keys[i] as string;
      touched.push(key);
      if (spec.algorithm === "fixed-window") {
        touched.push(windowKeyOf(key, spec, windowIndexAt(spec.window, now)));
      }
    });
  }
  const transaction = admin.multi();
  if (form === "function")
    transaction.fcall(APPLY_COUNTERS_FUNCTION, keys.length, ...keys, ...args);
  else transaction.eval(APPLY_COUNTERS_LUA, keys.length, ...keys, ...args);
  for (const key of touched) transaction.persist(key);
  const results = (await transaction.exec()) ?? [];
  const [error, reply] = results[0] ?? [new Error("no reply")];
  if (error) throw error;
  let offset = 0;
  return requests.map(({ counters }) => {
    const states = decodeReply(reply, offset, counters.length);
    offset += counters.length;
    return states;
  });
}

describe("Lua and TypeScript algorithms", () => {
  for (const form of ["function", "script"] as const) {
    it(`give identical states for the same random sequences, late requests and reloads included (${form})`, async () => {
      await admin.function("LOAD", "REPLACE", APPLY_COUNTERS_LIBRARY);
      let run = 0;
      await fc.assert(
        fc.asyncProperty(
          fc.array(counterShape, { minLength: 3, maxLength: 3 }),
          fc.array(step, { minLength: 1, maxLength: 40 }),
          async (initial, steps) => {
            run++;
            const reference = new AlgorithmReference();
            const subject = `user:${form}${run}`;
            const shapes = [...initial];
            const specOf = (index: number, cost: number): CounterSpec => {
              const shape = shapes[index] as (typeof shapes)[number];
              return counter(
                subject,
                `c${index}`,
                shape.algorithm,
                shape.limit,
                shape.window,
                cost,
                shape.observe ? "observe" : "enforce",
              );
            };
            let now = Date.UTC(2026, 0, 1) + (run % 997);
            for (const { advanceMs, reload, requests } of steps) {
              now += advanceMs;
              if (reload !== null) shapes[reload.counter] = reload.shape;
              const sent = requests.map(({ mask, cost, lateMs }) => {
                const counters = [0, 1, 2]
                  .filter((index) => (mask & (1 << index)) !== 0)
                  .map((index) => specOf(index, cost));
                // A token bucket of limit 0 asked for cost 0: TypeScript answers a retry of NaN.
                const nanRetry = counters.some(
                  (spec) => spec.algorithm === "token-bucket" && spec.limit === 0,
                );
                return {
                  counters:
                    nanRetry && cost === 0
                      ? counters.map((spec) => ({ ...spec, cost: 1 }))
                      : counters,
                  now: now - lateMs,
                };
              });
              const fromRedis = await runDirect(form, sent);
              const expected = sent.map(({ counters, now: stamp }) =>
                reference.apply(counters, stamp),
              );
              expect(fromRedis.map(plain)).toEqual(expected.map(plain));
            }
          },
        ),
        { numRuns: 60, seed: 20_261_201 },
      );
    });
  }
});

describe("batched requests", () => {
  it("apply in arrival order, each all-or-nothing, as the memory store would one by one", async () => {
    const store = new RedisStore({ client: server.url, prefix: "batch:", clock: "caller" });
    await store.ready();
    const memory = new MemoryStore();
    try {
      const now = Date.now() + 86_400_000;
      const shared = counter("ip:198.51.100.9", "shared", "sliding-window", 40, { ms: 60_000 });
      const requests = Array.from({ length: 200 }, (_, index) => [
        shared,
        counter(
          "ip:198.51.100.9",
          `own${index % 3}`,
          "token-bucket",
          20,
          { ms: 60_000 },
          1 + (index % 2),
        ),
      ]);
      const before = store.roundTrips;
      const fromRedis = await Promise.all(requests.map((request) => store.apply(request, now)));
      const fromMemory = requests.map((request) => memory.applySync(request, now));
      expect(fromRedis.map(plain)).toEqual(fromMemory.map(plain));
      // 200 requests in one tick: a handful of script calls of at most 64 requests each.
      expect(store.roundTrips - before).toBe(Math.ceil(200 / 64));
    } finally {
      await store.close();
    }
  });
});

describe("redis URLs", () => {
  it("understand redis://host:port/db and redis+cluster://host:port,host:port", async () => {
    const single = createRedisClient(`redis://127.0.0.1:${server.port}/3`);
    try {
      expect(single).toBeInstanceOf(Redis);
      expect((single as Redis).options.db).toBe(3);
      expect((single as Redis).options.enableOfflineQueue).toBe(false);
    } finally {
      single.disconnect();
    }
    const cluster = createRedisClient("redis+cluster://127.0.0.1:1,127.0.0.1:2");
    try {
      expect(cluster).toBeInstanceOf(Cluster);
      expect(cluster.options.enableOfflineQueue).toBe(false);
    } finally {
      cluster.disconnect();
    }
    expect(() => createRedisClient("http://127.0.0.1:6379")).toThrow(/redis:\/\//);
    expect(() => createRedisClient("redis+cluster://")).toThrow(/at least one node/);
  });
});
