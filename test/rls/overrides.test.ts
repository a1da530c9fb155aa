/**
 * Operators' overrides reach `edgelimit rls`'s policy (forward-auth and the policy's gRPC
 * domains): one rls process on a real redis-server, overrides set with `edgelimit override`
 * against the same Redis, applied within the documented bound (the policy's `overrides.refresh`,
 * 500 ms here, 5 s by default; polled up to 15 s for a busy machine). The policy's 600 s window may turn during the test, so a
 * raised limit is read from the answer's `X-RateLimit-Limit`, not inferred from a 200.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startRedis } from "../redis/redis-server.js";
import { cliEntry } from "../support/cli-entry.js";
import { withinOneWindow } from "../support/windows.js";
import { within } from "../support/within.js";
import { type RlsProcess, startRls } from "./harness.js";

const dir = mkdtempSync(join(tmpdir(), "edgelimit-rls-overrides-"));
const policyFile = join(dir, "policy.yaml");
writeFileSync(
  policyFile,
  `version: 1
identity:
  ip: { source: x-forwarded-for, trustedProxies: [127.0.0.0/8] }
tiers:
  anonymous:
    global: { limit: 2, window: 600s }
overrides: { maxLimit: 100, refresh: 500ms }
`,
);
let redis: Awaited<ReturnType<typeof startRedis>>;
let rls: RlsProcess;

beforeAll(async () => {
  redis = await startRedis();
  rls = await startRls(["--policy", policyFile, "--store", redis.server.url]);
}, 60_000);

afterAll(async () => {
  await rls?.stop();
  await redis?.cleanup();
  rmSync(dir, { recursive: true, force: true });
});

/** Caddy's forward-auth call for `client`: 200, 429 over the limit, 403 for a block. */
function check(client: string): Promise<{ status: number; limit: string | undefined }> {
  return new Promise((resolve, reject) => {
    const headers = {
      "x-forwarded-method": "GET",
      "x-forwarded-uri": "/api/x",
      "x-forwarded-for": client,
    };
    const outgoing = request(
      `http://127.0.0.1:${rls.httpPort}/check/caddy`,
      { headers, agent: false },
      (response) => {
        response.resume();
        response.on("end", () => {
          const limit = response.headers["x-ratelimit-limit"];
          resolve({ status: response.statusCode ?? 0, limit: limit as string | undefined });
        });
      },
    );
    outgoing.on("error", reject);
    outgoing.end();
  });
}

function override(args: string[]) {
  const result = spawnSync(
    process.execPath,
    [...cliEntry(), "override", ...args, "--store", redis.server.url],
    { encoding: "utf8" },
  );
  return { code: result.status, stderr: result.stderr };
}

describe("overrides in edgelimit rls", () => {
  it("raise a client's limit and block another within the bound; the dashboard lists them", async () => {
    const raised = "198.51.100.41";
    const blocked = "198.51.100.42";
    // The policy's 600 s window on the real clock: the refusal needs the two's window.
    await withinOneWindow(600_000, 5_000);
    for (let i = 0; i < 2; i++) expect((await check(raised)).status).toBe(200);
    expect((await check(raised)).status).toBe(429);
    const set = override(["set", `ip:${raised}`, "--limit", "50", "--policy", policyFile]);
    expect([set.code, set.stderr]).toEqual([0, ""]);
    expect(override(["set", `ip:${blocked}`, "--block", "--policy", policyFile]).code).toBe(0);
    await within(async () => {
      const answer = await check(raised);
      return answer.status === 200 && answer.limit === "50";
    }, "the raised limit");
    await within(async () => (await check(blocked)).status === 403, "the block");
    const snapshot = (await (await fetch(`${rls.adminUrl}api/snapshot`)).json()) as {
      overrides: { kept: boolean; active: number };
    };
    expect(snapshot.overrides).toMatchObject({ kept: true, active: 2 });
    const metrics = await (await fetch(`${rls.adminUrl}metrics`)).text();
    expect(metrics).toMatch(/^edgelimit_overrides_active 2$/m);
    // Removed: the plan's limit again for the one, the other counted from where it stands.
    expect(override(["remove", `ip:${blocked}`]).code).toBe(0);
    await within(async () => (await check(blocked)).status !== 403, "the removal");
  }, 60_000);
});
