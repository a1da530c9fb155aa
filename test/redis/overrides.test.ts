/**
 * Overrides in Redis, across processes: two gateways (`edgelimit serve`, each its own process)
 * on one redis-server; the `edgelimit override` CLI and the library API (`limiter.overrides`)
 * set overrides, and every instance applies them within the documented bound (the policy's
 * `overrides.refresh`, 500 ms here, 5 s by default; polled up to 15 s for a busy machine). Then `INFO commandstats`: a
 * request sends the same commands with overrides present as without.
 */
import { execFile, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLimiter } from "../../src/limiter.js";
import { loadPolicy } from "../../src/policy/load.js";
import { storeFromUrl } from "../../src/stores/from-url.js";
import { RedisStore } from "../../src/stores/redis.js";
import { cliEntry } from "../support/cli-entry.js";
import { type ServeProcess, startServe } from "../support/serve-process.js";
import { withinOneWindow } from "../support/windows.js";
import { within } from "../support/within.js";
import { startRedis } from "./redis-server.js";
import { counter } from "./reference.js";

const POLICY = `
version: 1
identity:
  user:
    trustedHeader: { user: x-user, from: any }
tiers:
  anonymous:
    global: { limit: 3, window: 600s }
  authenticated:
    global: { limit: 3, window: 600s }
overrides: { maxLimit: 1000, refresh: 500ms }
`;

const dir = mkdtempSync(join(tmpdir(), "edgelimit-overrides-"));
const policyFile = join(dir, "policy.yaml");
writeFileSync(policyFile, POLICY);
let redis: Awaited<ReturnType<typeof startRedis>>;
const gateways: { base: string; admin: string; served: ServeProcess }[] = [];

function cli(args: string[]) {
  const result = spawnSync(process.execPath, [...cliEntry(), "override", ...args], {
    encoding: "utf8",
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** `cli` in a child process that does not block this one: for several at once. */
function cliAsync(args: string[]): Promise<{ code: number | string | null; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [...cliEntry(), "override", ...args], (error, _stdout, stderr) =>
      resolve({ code: error === null ? 0 : (error.code ?? null), stderr }),
    );
  });
}

/** The `edgelimit_overrides_active` gauge on a gateway's /metrics. */
async function activeGauge(admin: string): Promise<string | undefined> {
  const metrics = await (await fetch(`${admin}/metrics`)).text();
  return /^edgelimit_overrides_active (\d+)$/m.exec(metrics)?.[1];
}

async function status(base: string, user: string): Promise<number> {
  const response = await fetch(`${base}/api/x`, { headers: { "x-user": user } });
  await response.arrayBuffer();
  return response.status;
}

beforeAll(async () => {
  redis = await startRedis();
  for (let i = 0; i < 2; i++) {
    const served = await startServe({ policy: policyFile, args: ["--store", redis.server.url] });
    gateways.push({ base: served.base, admin: served.admin, served });
  }
  for (const { base } of gateways) {
    await within(async () => (await status(base, "warmup").catch(() => 0)) === 200, "a gateway");
  }
}, 60_000);

afterAll(async () => {
  for (const { served } of gateways) served.child.kill("SIGKILL");
  await redis?.cleanup();
  rmSync(dir, { recursive: true, force: true });
});

describe("overrides across processes on one redis-server", () => {
  it("a CLI limit override raises a user's limit on every gateway within the bound; its expiry restores the plan's", async () => {
    const [a, b] = gateways as [(typeof gateways)[0], (typeof gateways)[0]];
    // The policy's 600 s windows: the refusals before the raise and after its expiry in one.
    await withinOneWindow(600_000, 15_000);
    for (let i = 0; i < 3; i++) expect(await status(a.base, "u_raise")).toBe(200);
    expect(await status(b.base, "u_raise")).toBe(429);
    const until = new Date(Date.now() + 6_000).toISOString();
    const set = cli([
      "set",
      "user:u_raise",
      "--limit",
      "1000",
      "--until",
      until,
      "--note",
      "contract 42",
      "--store",
      redis.server.url,
      "--policy",
      policyFile,
    ]);
    expect(set.stderr).toBe("");
    expect(set.code).toBe(0);
    // The raised limit, not a new window (the policy's 600 s may turn meanwhile), admits these:
    // the answer names the override's limit.
    for (const { base } of [a, b]) {
      await within(async () => {
        const response = await fetch(`${base}/api/x`, { headers: { "x-user": "u_raise" } });
        await response.arrayBuffer();
        return response.status === 200 && response.headers.get("x-ratelimit-limit") === "1000";
      }, "the raised limit");
    }
    // The admin listener shows what the gateway holds, from memory: the snapshot and the gauge.
    const snapshot = (await (await fetch(`${b.admin}/api/snapshot`)).json()) as {
      overrides: { kept: boolean; active: number; shown: Record<string, unknown>[] };
    };
    expect(snapshot.overrides).toMatchObject({ kept: true, active: 1 });
    expect(snapshot.overrides.shown).toEqual([
      expect.objectContaining({
        subject: "user:u_raise",
        scope: "all",
        effect: "limit",
        limit: 1000,
        until: Date.parse(until),
        note: "contract 42",
      }),
    ]);
    expect(await activeGauge(b.admin)).toBe("1");
    const listed = cli(["list", "--store", redis.server.url, "--log", "5"]);
    expect(listed.stdout).toContain("user:u_raise all limit 1000");
    expect(listed.stdout).toContain("set user:u_raise all (contract 42)");
    // Expiry needs no refresh: each instance stops applying it at `until`.
    await within(async () => (await status(a.base, "u_raise")) === 429, "the expiry on a");
    expect(await status(b.base, "u_raise")).toBe(429);
    expect(await activeGauge(b.admin)).toBe("0");
  }, 40_000);

  it("block through the library refuses at once where it was set and within the bound elsewhere; remove lifts it", async () => {
    // The store as the gateways and the CLI open it (the same prefix).
    const store = await storeFromUrl(redis.server.url);
    const limiter = createLimiter({ policy: loadPolicy(policyFile), store, onStoreError: false });
    try {
      const request = { ip: "203.0.113.9", path: "/api/x", headers: { "x-user": "u_leak" } };
      expect((await limiter.check(request)).action).toBe("allow");
      await limiter.overrides.set({ subject: "user:u_leak", block: "key leaked", note: "ops" });
      const refused = await limiter.check(request);
      expect([refused.status, refused.reason]).toEqual([403, "override-block"]);
      const [, b] = gateways as [(typeof gateways)[0], (typeof gateways)[0]];
      await within(async () => (await status(b.base, "u_leak")) === 403, "the block on b");
      // The first test's override, expired, is not counted (the store may still hold it).
      expect(await activeGauge(b.admin)).toBe("1");
      await limiter.overrides.remove({ subject: "user:u_leak" });
      // Counted again (b's polls counted too, while b did not know of the block yet).
      expect((await limiter.check(request)).reason).not.toBe("override-block");
      await within(async () => (await status(b.base, "u_leak")) !== 403, "the removal on b");
      expect(await activeGauge(b.admin)).toBe("0");
    } finally {
      limiter.close();
      await store.close?.();
    }
  }, 40_000);

  it("bad input from the CLI is refused with its code and nothing is stored", async () => {
    const before = cli(["list", "--store", redis.server.url, "--json"]).stdout;
    const cases: [string[], string][] = [
      [["user:u_x", "--rule", "nope", "--limit", "5"], "EL_OVERRIDE_RULE"],
      [["user:u_x", "--limit", "1001"], "EL_OVERRIDE_LIMIT"],
      [["user:u_x", "--limit", "5", "--until", "2001-01-01T00:00:00Z"], "EL_OVERRIDE_EXPIRY"],
      [["nobody", "--block"], "EL_OVERRIDE_SUBJECT"],
    ];
    // The four at once: each is mostly Node starting up, one core's work.
    const results = await Promise.all(
      cases.map(([args]) =>
        cliAsync(["set", ...args, "--store", redis.server.url, "--policy", policyFile]),
      ),
    );
    for (const [index, [, code]] of cases.entries()) {
      expect(results[index]?.code).toBe(1);
      expect(results[index]?.stderr).toContain(`(${code})`);
    }
    expect(cli(["list", "--store", redis.server.url, "--json"]).stdout).toBe(before);
  }, 40_000);
});

describe("the cost of overrides on a request", () => {
  it("INFO commandstats: N requests send the same commands with overrides present as without", async () => {
    const own = await startRedis();
    const admin = new Redis(own.server.url);
    const store = new RedisStore({ client: own.server.url, prefix: "" });
    await store.ready();
    // A long refresh: the background read does not fall inside the measured window.
    const limiter = createLimiter({
      policy: loadPolicy(policyFile),
      store,
      onStoreError: false,
      overrides: { refreshMs: 600_000 },
    });
    const calls = async (): Promise<Record<string, number>> => {
      const info = await admin.info("commandstats");
      const found: Record<string, number> = {};
      for (const [, name, count] of info.matchAll(/^cmdstat_([a-z|]+):calls=(\d+)/gm)) {
        if (name !== "info" && name !== "config|resetstat") found[name as string] = Number(count);
      }
      return found;
    };
    /** A read on the store's own connection: it runs after every follow-up sent before it. */
    const settled = () =>
      store.apply(
        [counter("ip:198.51.100.4", "settle", "fixed-window", 1, { ms: 60_000 }, 0)],
        Date.now(),
      );
    /** One request of each of 20 subjects (each makes its key): the commands they sent. */
    const requests = async (prefix: string) => {
      await admin.config("RESETSTAT");
      for (let i = 0; i < 20; i++) {
        await limiter.check({
          ip: "198.51.100.4",
          path: "/api/x",
          headers: { "x-user": `${prefix}${i}` },
        });
      }
      // A new key's expiry follows its INCRBY without being waited for (fixed-windows.ts):
      // read the stats only once the last one has run.
      await settled();
      return calls();
    };
    try {
      // The first request primes the block cache's reset log reader (an HMGET of its own).
      await requests("u_warm");
      const without = await requests("u_plain");
      for (let i = 0; i < 20; i++) {
        await limiter.overrides.set({ subject: `user:u_limited${i}`, limit: 10 + i });
      }
      const withOthers = await requests("u_other");
      const overridden = await requests("u_limited");
      expect(without.incrby ?? without.evalsha).toBe(20);
      expect(withOthers).toEqual(without);
      expect(overridden).toEqual(without);
    } finally {
      limiter.close();
      await store.close();
      admin.disconnect();
      await own.cleanup();
    }
  }, 30_000);
});
