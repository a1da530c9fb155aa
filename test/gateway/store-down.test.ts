/**
 * A store that is down must be visible: said at start, in a rate-limited log line with its
 * cause, in the decision log, on `/healthz` (degraded, not down, with the store's breaker and
 * what is counted in the gateway meanwhile), and to library users through `onStoreError`. A URL
 * with no host is refused before anything starts.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createLimiter } from "../../src/limiter.js";
import { definePolicy } from "../../src/policy/load.js";
import { redisStoreFromUrl } from "../../src/stores/redis.js";
import { type StartedServe, startServe } from "../support/serve-process.js";
import { withinOneWindow } from "../support/windows.js";
import { closedPort } from "./helpers.js";

async function waitFor(predicate: () => boolean, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The `msg` of the log line that says the store did not answer at start. */
function startWarning(output: string): string | undefined {
  const line = output.split("\n").find((text) => text.includes("not reachable at start"));
  return line === undefined ? undefined : (JSON.parse(line) as { msg: string }).msg;
}

describe("a store that is down", () => {
  let served: StartedServe | undefined;
  afterAll(() => {
    served?.child.kill("SIGKILL");
  });

  it("is said at start, logged with its cause, and reported by /healthz as degraded", async () => {
    served = await startServe({
      policy: "examples/policies/cloudfront.yaml",
      built: true,
      args: ["--store", `redis://127.0.0.1:${await closedPort()}`],
    });
    const { output, admin } = served;
    // Said as it is: the seed policy's rules count in the gateway, its failClosed paths answer 503.
    expect(startWarning(output())).toBe(
      "the store is not reachable at start; until it answers, all 11 rules (failMode local) are counted in this process, each against its own limit; requests under /api/admin/, /api/billing/ (failClosed) are answered 503",
    );

    const health = async () => (await fetch(`${admin}/healthz`)).json();
    expect(await health()).toMatchObject({ status: "ok", store: { name: "redis", failures: 0 } });

    // Fail-open paths still answer; fail-closed ones answer 503; the cause is logged once.
    // The seed's minute windows: a debt whose minute ended is dropped, and owedKeys below with it.
    await withinOneWindow(60_000, 5_000);
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) {
      statuses.push((await fetch(`${served.base}/api/search?q=${i}`)).status);
    }
    statuses.push((await fetch(`${served.base}/api/admin/users`)).status);
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

  it("is said at start with what each rule's failMode does until the store answers", async () => {
    const folder = mkdtempSync(join(tmpdir(), "edgelimit-store-down-"));
    const policy = join(folder, "policy.yaml");
    writeFileSync(
      policy,
      [
        "version: 1",
        "tiers:",
        "  anonymous:",
        "    global: 60",
        "    paths:",
        "      /api/search: { limit: 30, failMode: open }",
        "      /api/pay: { limit: 5, failMode: closed }",
        "      /api/beta: { limit: 5, failMode: closed, shadow: true }",
        "failClosed: [/api/admin/]",
        "",
      ].join("\n"),
    );
    const mixed = await startServe({
      policy,
      upstream: `http://127.0.0.1:${await closedPort()}`,
      args: ["--store", `redis://127.0.0.1:${await closedPort()}`],
    });
    try {
      expect(startWarning(mixed.output())).toBe(
        "the store is not reachable at start; until it answers, rule anonymous.global (failMode local) is counted in this process against its own limit; rules anonymous.path./api/search, anonymous.path./api/beta (failMode open, or closed on a shadow rule) are not counted: their requests are admitted; a request matching rule anonymous.path./api/pay (failMode closed) is answered 503; requests under /api/admin/ (failClosed) are answered 503",
      );
    } finally {
      mixed.child.kill("SIGKILL");
      rmSync(folder, { recursive: true, force: true });
    }
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
