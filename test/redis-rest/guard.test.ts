/**
 * `edgelimit/redis-rest` goes through the remote-store guard (src/stores/remote/guard.ts) as
 * every remote store does: what `/healthz` shows of its calls (`traits.status`), and a PING
 * before the call that probes an open circuit, so that a stalled Redis is never sent a script
 * it would apply long after its decision gave up. Against a real redis-server behind the REST
 * bridge; Redis is stalled with SIGSTOP, and `INFO commandstats` says what it ran.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CounterSpec } from "../../src/core/types.js";
import { redisRestStore } from "../../src/stores/redis-rest.js";
import { type RedisServer, startRedis } from "../redis/redis-server.js";
import { type RedisRestBridge, startRedisRestBridge } from "../support/redis-rest-bridge.js";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let server: RedisServer;
let cleanup: () => Promise<void>;
let bridge: RedisRestBridge;
let admin: Redis;

beforeAll(async () => {
  ({ server, cleanup } = await startRedis());
  bridge = await startRedisRestBridge(server.url);
  admin = new Redis({ port: server.port, host: "127.0.0.1" });
  admin.on("error", () => {});
});

afterAll(async () => {
  admin?.disconnect();
  await bridge?.close();
  await cleanup?.();
});

function counter(key: string): CounterSpec {
  return {
    key: `${key}|test|global`,
    subject: key,
    algorithm: "fixed-window",
    limit: 100,
    window: { ms: 60_000 },
    cost: 1,
    mode: "enforce",
    ruleId: "anonymous.global",
    namespace: "test",
  };
}

/** Calls of each command Redis has run since its statistics were reset. */
async function calls(...names: string[]): Promise<Record<string, number>> {
  const info = await admin.info("commandstats");
  return Object.fromEntries(
    names.map((name) => [
      name,
      Number(new RegExp(`^cmdstat_${name}:calls=(\\d+)`, "m").exec(info)?.[1] ?? 0),
    ]),
  );
}

describe("Redis over HTTP through the remote-store guard", () => {
  it("shows its calls in traits.status, and probes a stalled Redis with PING, never the script", async () => {
    const COOLDOWN_MS = 1000;
    const store = redisRestStore({
      url: bridge.url,
      token: bridge.token,
      clock: "caller",
      timeoutMs: 300,
      breaker: { failureThreshold: 2, cooldownMs: COOLDOWN_MS },
    });
    await store.ready();
    const status = () => store.traits.status?.();
    await store.apply([counter("ip:10.9.0.1")], Date.now());
    expect(status()).toMatchObject({ state: "ok", failures: 0, openParts: [] });

    await admin.config("RESETSTAT");
    const pid = server.pid as number;
    process.kill(pid, "SIGSTOP");
    try {
      // Two calls unanswered: the circuit opens.
      for (let i = 0; i < 2; i++) {
        await expect(store.apply([counter(`ip:10.9.1.${i}`)], Date.now())).rejects.toThrow();
      }
      expect(status()).toMatchObject({ state: "open", failures: 2, breakerOpened: 1 });
      expect(status()?.openParts).toHaveLength(1);
      expect(status()?.lastError).toMatch(/redis REST/);
      // Refused at once while open.
      await expect(store.apply([counter("ip:10.9.2.1")], Date.now())).rejects.toThrow(
        /circuit breaker is open/,
      );
      // After the cooldown, one call probes: its PING goes unanswered, its script is not sent.
      await sleep(COOLDOWN_MS + 50);
      await expect(store.apply([counter("ip:10.9.3.1")], Date.now())).rejects.toThrow();
      expect(status()).toMatchObject({ state: "open", breakerOpened: 2 });
    } finally {
      process.kill(pid, "SIGCONT");
    }
    // What Redis ran once continued: the two scripts sent before the circuit opened, and the
    // probe's PING; the probing call's script never left.
    await sleep(300);
    expect(await calls("evalsha", "eval", "ping")).toEqual({ evalsha: 2, eval: 0, ping: 1 });

    // Redis answers again: the next probe's PING passes, the call goes through, the circuit
    // closes.
    await sleep(COOLDOWN_MS + 50);
    await expect(store.apply([counter("ip:10.9.4.1")], Date.now())).resolves.toHaveLength(1);
    expect(status()).toMatchObject({ state: "ok", openParts: [] });
  });
});
