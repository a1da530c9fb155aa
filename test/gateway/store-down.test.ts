/**
 * A store that is down must be visible: said at start, in a rate-limited log line with its
 * cause, in the decision log, on `/healthz` (degraded, not down, with the store's breaker and
 * what is counted in the gateway meanwhile), and to library users through `onStoreError`. A URL
 * with no host is refused before anything starts.
 */
import { spawnSync } from "node:child_process";
import { afterAll, describe, expect, it } from "vitest";
import { createLimiter } from "../../src/limiter.js";
import { definePolicy } from "../../src/policy/load.js";
import { redisStoreFromUrl } from "../../src/stores/redis.js";
import { type ServeProcess, spawnServe } from "../support/serve-process.js";
import { closedPort } from "./helpers.js";

async function waitFor(predicate: () => boolean, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe("a store that is down", () => {
  let served: ServeProcess | undefined;
  afterAll(() => {
    served?.child.kill("SIGKILL");
  });

  it("is said at start, logged with its cause, and reported by /healthz as degraded", async () => {
    const [port, adminPort, redisPort] = [
      await closedPort(),
      await closedPort(),
      await closedPort(),
    ];
    served = spawnServe({
      policy: "examples/policies/cloudfront.yaml",
      built: true,
      port,
      adminPort,
      args: ["--store", `redis://127.0.0.1:${redisPort}`],
    });
    const output = served.output;
    await waitFor(() => output().includes('"msg":"gateway started"'), "the gateway to start");
    expect(output()).toContain("the store is not reachable at start");

    const health = async () => (await fetch(`http://127.0.0.1:${adminPort}/healthz`)).json();
    expect(await health()).toMatchObject({ status: "ok", store: { name: "redis", failures: 0 } });

    // Fail-open paths still answer; fail-closed ones answer 503; the cause is logged once.
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) {
      statuses.push((await fetch(`http://127.0.0.1:${port}/api/search?q=${i}`)).status);
    }
    statuses.push((await fetch(`http://127.0.0.1:${port}/api/admin/users`)).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200, 503]);

    const state = (await health()) as { status: string; store: Record<string, unknown> };
    expect(state.status).toBe("degraded");
    expect(state.store.failures).toBe(6);
    expect(String(state.store.lastError)).toMatch(/redis|connect|ECONNREFUSED|writeable/i);
    // The store's own view (its calls failed, its breaker opened after five) and what was
    // counted in the gateway meanwhile: the five /api/search requests, owed to the store.
    expect(state.store).toMatchObject({
      calls: { state: "open", openParts: ["redis"], breakerOpened: 1 },
      local: { counting: true, decisions: 5, owedKeys: 2 },
    });

    await waitFor(() => output().includes("the store failed a decision"), "the warning");
    const warnings = output()
      .split("\n")
      .filter((line) => line.includes("the store failed a decision"));
    expect(warnings).toHaveLength(1);
    const decisions = output()
      .split("\n")
      .filter((line) => line.includes('"reason":"store-failed-local"'));
    expect(decisions.length).toBeGreaterThan(0);
    expect(JSON.parse(decisions[0] as string).storeError).toMatch(/\S/);
  });

  it("tells library users through onStoreError, and warns once by default", async () => {
    const policy = definePolicy({
      version: 1,
      identity: { ip: { source: "socket" } },
      tiers: { anonymous: { global: 10 } },
    });
    const store = redisStoreFromUrl(`redis://127.0.0.1:${await closedPort()}`);
    const causes: string[] = [];
    const observed = createLimiter({
      policy,
      store,
      onStoreError: (error) => causes.push(String(error)),
    });
    const warned: string[] = [];
    const original = console.warn;
    console.warn = (line: string) => warned.push(line);
    try {
      const quiet = createLimiter({ policy, store });
      for (let i = 0; i < 3; i++) {
        expect((await observed.check({ ip: "192.0.2.1", path: "/" })).reason).toBe(
          "store-failed-local",
        );
        expect((await quiet.check({ ip: "192.0.2.1", path: "/" })).storeError).toMatch(/\S/);
      }
    } finally {
      console.warn = original;
      await store.close();
    }
    expect(causes).toHaveLength(3);
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatch(/the redis store failed a decision/);
  });

  it("refuses a Redis URL without a host at start", () => {
    const result = spawnSync(
      process.execPath,
      [
        "dist/cli/main.js",
        "serve",
        "--policy",
        "examples/policies/cloudfront.yaml",
        "--demo",
        "--store",
        "redis://",
      ],
      { encoding: "utf8", timeout: 20_000 },
    );
    expect(result.status).not.toBe(0);
    expect(`${result.stdout}${result.stderr}`).toContain("redis URL has no host");
  });
});
