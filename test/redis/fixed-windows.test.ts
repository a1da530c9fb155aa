/**
 * Fixed windows counted without the script: what a decision sends to Redis (INFO commandstats),
 * and the give-back that keeps a refused request all-or-nothing.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CounterSpec } from "../../src/core/types.js";
import { LATE_GRACE_MS, windowIndexAt } from "../../src/core/windows.js";
import { RedisStore } from "../../src/stores/redis.js";
import { withinOneWindow } from "../support/windows.js";
import { type RedisServer, startRedis } from "./redis-server.js";
import { counter } from "./reference.js";

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

/** Calls of each command the server ran since its last `CONFIG RESETSTAT`. */
async function commandCalls(): Promise<Record<string, number>> {
  const info = await admin.info("commandstats");
  const calls: Record<string, number> = {};
  for (const match of info.matchAll(/^cmdstat_([a-z|]+):calls=(\d+)/gm)) {
    calls[match[1] as string] = Number(match[2]);
  }
  return calls;
}

/** A day ahead of the real clock, at the start of a minute: keys outlive the test. */
const minute = () => Math.ceil((Date.now() + 86_400_000) / 60_000) * 60_000;

describe("fixed windows without the script", () => {
  it("an admitted decision sends one INCRBY per counter and no script call; a new key's expiry follows once", async () => {
    const store = new RedisStore({ client: server.url, prefix: "stats:" });
    await store.ready();
    try {
      // Minute windows on the server's clock: a new minute would make new keys and expiries.
      await withinOneWindow(60_000, 2_000);
      const one = [counter("ip:192.0.2.10", "global", "fixed-window", 100, { ms: 60_000 })];
      const two = [...one, counter("ip:192.0.2.10", "path", "fixed-window", 100, { ms: 60_000 })];
      // The first call samples the server's clock (TIME) and makes the key; the read after it
      // runs once its expiry has followed (one connection, in order).
      await store.apply(one, Date.now());
      await store.apply([{ ...(one[0] as CounterSpec), cost: 0 }], Date.now());
      await admin.config("RESETSTAT");
      for (let i = 0; i < 20; i++) await store.apply(one, Date.now());
      for (let i = 0; i < 20; i++) await store.apply(two, Date.now());
      // Again a read that runs after every follow-up.
      await store.apply([{ ...(one[0] as CounterSpec), cost: 0 }], Date.now());
      const calls = await commandCalls();
      // The read (cost 0) is a GET: it makes no key.
      expect(calls.incrby).toBe(20 + 40);
      expect(calls.get ?? 0).toBe(1);
      // The path counter's key was made by the first request with two counters.
      expect(calls.pexpire).toBe(1);
      expect(calls.fcall ?? 0).toBe(0);
      expect(calls.evalsha ?? 0).toBe(0);
      expect(calls.eval ?? 0).toBe(0);
      // The server's clock is sampled again once a second, not per decision.
      expect(calls.time ?? 0).toBeLessThanOrEqual(5);
      expect(store.roundTrips).toBe(43);
      // Both keys expire with their window, and the late grace.
      const keys = await admin.keys("stats:*");
      expect(keys).toHaveLength(2);
      for (const key of keys) {
        const index = Number(key.split(":").pop());
        const late = (await admin.pexpiretime(key)) - ((index + 1) * 60_000 + LATE_GRACE_MS);
        expect(late).toBeGreaterThanOrEqual(-5);
        expect(late).toBeLessThanOrEqual(1000);
      }
      // With no request after it, a new key's expiry goes on its own.
      const [alone] = await store.apply(
        [counter("ip:192.0.2.10", "alone", "fixed-window", 100, { ms: 60_000 })],
        Date.now(),
      );
      expect(alone?.count).toBe(1);
      const [aloneKey] = await admin.keys("stats:*|alone|*");
      const deadline = Date.now() + 2000;
      while ((await admin.pttl(aloneKey as string)) < 0 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      const ttl = await admin.pttl(aloneKey as string);
      expect(ttl).toBeGreaterThan(LATE_GRACE_MS);
      expect(ttl).toBeLessThanOrEqual(60_000 + LATE_GRACE_MS + 1000);
    } finally {
      await store.close();
    }
  });

  it("a refused request gives back its increments on the counters that admitted it", async () => {
    const store = new RedisStore({ client: server.url, prefix: "giveback:", clock: "caller" });
    await store.ready();
    try {
      const now = minute();
      const tight = counter("ip:192.0.2.11", "tight", "fixed-window", 2, { ms: 60_000 });
      const loose = counter("ip:192.0.2.11", "loose", "fixed-window", 10, { ms: 60_000 });
      const shadow = counter(
        "ip:192.0.2.11",
        "shadow",
        "fixed-window",
        1,
        { ms: 60_000 },
        1,
        "observe",
      );
      const request = [tight, loose, shadow];
      for (let i = 0; i < 2; i++) {
        const states = await store.apply(request, now + i);
        expect(states.map((state) => state.allowed)).toEqual([true, true, i === 0]);
      }
      const [refusedTight, refusedLoose, refusedShadow] = await store.apply(request, now + 2);
      expect(refusedTight).toMatchObject({ allowed: false, count: 3 });
      expect(refusedLoose).toMatchObject({ allowed: true, count: 2, remaining: 8 });
      expect(refusedShadow).toMatchObject({ allowed: false, count: 3 });
      // This process's next command runs after the give-back (one connection, in order)...
      const read = await store.apply(
        request.map((spec) => ({ ...spec, cost: 0 })),
        now + 3,
      );
      expect(read.map((state) => state.count)).toEqual([3, 2, 3]);
      // ...and the keys hold what the contract says: the attempt where refused, nothing else.
      const keyOf = (spec: CounterSpec) =>
        `${store.redisKey(spec)}|w60000:${windowIndexAt(spec.window, now)}`;
      expect(await admin.mget(request.map(keyOf))).toEqual(["3", "2", "3"]);
      expect(store.followUpFailures).toBe(0);
    } finally {
      await store.close();
    }
  });

  it("concurrent refused requests leave no count below what was admitted, and none above once given back", async () => {
    const stores = [0, 1].map(
      () => new RedisStore({ client: server.url, prefix: "concurrent:", clock: "caller" }),
    );
    await Promise.all(stores.map((store) => store.ready()));
    try {
      const now = minute();
      const tight = counter("ip:192.0.2.12", "tight", "fixed-window", 5, { ms: 60_000 });
      const loose = counter("ip:192.0.2.12", "loose", "fixed-window", 1000, { ms: 60_000 });
      const answers = await Promise.all(
        Array.from({ length: 400 }, (_, i) =>
          (stores[i % 2] as RedisStore).apply([tight, loose], now + (i % 50)),
        ),
      );
      const admitted = answers.filter(([a, b]) => a?.allowed && b?.allowed).length;
      expect(admitted).toBe(5);
      // While give-backs are on their way a count may be too high, never below the admissions.
      for (const [, state] of answers) expect(state?.count).toBeGreaterThanOrEqual(1);
      // Each store's give-backs go before its next command: once both stores have sent one,
      // the counts are exact again.
      const read = [
        { ...tight, cost: 0 },
        { ...loose, cost: 0 },
      ];
      for (const store of stores) await store.apply(read, now + 100);
      for (const store of stores) {
        expect((await store.apply(read, now + 101)).map((state) => state.count)).toEqual([400, 5]);
      }
    } finally {
      await Promise.all(stores.map((store) => store.close()));
    }
  });

  it("a request with a sliding window too counts its fixed window in the same key, through the script", async () => {
    const store = new RedisStore({ client: server.url, prefix: "mixed:", clock: "caller" });
    await store.ready();
    try {
      const now = minute();
      const fixed = counter("ip:192.0.2.13", "global", "fixed-window", 3, { ms: 60_000 });
      const sliding = counter("ip:192.0.2.13", "search", "sliding-window", 100, { ms: 60_000 });
      await admin.config("RESETSTAT");
      const counts: number[] = [];
      const allowed: boolean[] = [];
      for (const [i, request] of [[fixed], [fixed, sliding], [fixed], [fixed, sliding]].entries()) {
        const [state] = await store.apply(request, now + i);
        counts.push(state?.count ?? Number.NaN);
        allowed.push(state?.allowed ?? false);
      }
      expect(counts).toEqual([1, 2, 3, 4]);
      expect(allowed).toEqual([true, true, true, false]);
      const calls = await commandCalls();
      expect(calls.fcall).toBe(2);
      // The refused mixed request left the sliding window as it was: counted once.
      const [, read] = await store.apply(
        [
          { ...fixed, cost: 0 },
          { ...sliding, cost: 0 },
        ],
        now + 9,
      );
      expect(read?.count).toBe(1);
    } finally {
      await store.close();
    }
  });

  it("requests of one tick share one pipeline, each counted on its own", async () => {
    const store = new RedisStore({ client: server.url, prefix: "tick:", clock: "caller" });
    await store.ready();
    try {
      const now = minute();
      const spec = counter("ip:192.0.2.15", "global", "fixed-window", 30, { ms: 60_000 });
      const states = await Promise.all(Array.from({ length: 50 }, () => store.apply([spec], now)));
      expect(store.roundTrips).toBe(1);
      expect(states.filter((state) => state[0]?.allowed)).toHaveLength(30);
      expect(states.map((state) => state[0]?.count).sort((a, b) => (a ?? 0) - (b ?? 0))).toEqual(
        Array.from({ length: 50 }, (_, i) => i + 1),
      );
    } finally {
      await store.close();
    }
  });

  it("reset forgets a fixed window counted with the server's clock", async () => {
    const store = new RedisStore({ client: server.url, prefix: "reset:" });
    await store.ready();
    try {
      const spec = counter("ip:192.0.2.14", "global", "fixed-window", 2, { ms: 60_000 });
      for (let i = 0; i < 3; i++) await store.apply([spec], Date.now());
      await store.reset([spec]);
      const [state] = await store.apply([spec], Date.now());
      expect(state).toMatchObject({ allowed: true, count: 1 });
    } finally {
      await store.close();
    }
  });
});
