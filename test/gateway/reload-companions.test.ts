import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type StartedServe, startServe } from "../support/serve-process.js";
import { withinOneWindow } from "../support/windows.js";
import { startOrigin, TEST_SECRET, type TestServer } from "./helpers.js";

/**
 * A reload rebuilds what the policy describes beside its rules: the lists it names and its
 * challenge settings. Before, SIGHUP swapped the rules and kept the old lists and challenge.
 */
const policyWith = (denyFile: string, band: number) => `
version: 1
identity:
  ip: { source: x-forwarded-for, trustedProxies: [127.0.0.0/8, "::1/128"] }
tiers:
  anonymous:
    global: { limit: 2, action: challenge, challengeBand: ${band} }
challenge:
  path: /captcha
  secret: { value: reload-test-pass-secret-0123456789 }
lists:
  - { name: blocked, kind: deny, file: ${JSON.stringify(denyFile)} }
`;

const dir = mkdtempSync(join(tmpdir(), "edgelimit-reload-"));
let origin: TestServer;
let child: ChildProcess;
let base: string;
let served: StartedServe | undefined;
const output = (): string => served?.output() ?? "";

async function waitUntil(check: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`timed out waiting for ${what}\n${output()}`);
}

const statusFrom = async (ip: string) =>
  (await fetch(`${base}/page`, { headers: { "x-forwarded-for": ip }, redirect: "manual" })).status;

beforeAll(async () => {
  origin = await startOrigin((_req, res) => res.end("origin"));
  writeFileSync(join(dir, "deny-a.txt"), "203.0.113.1\n");
  writeFileSync(join(dir, "deny-b.txt"), "203.0.113.2\n");
  writeFileSync(join(dir, "policy.yaml"), policyWith(join(dir, "deny-a.txt"), 2));
  served = await startServe({
    policy: join(dir, "policy.yaml"),
    upstream: origin.url,
    env: { EDGELIMIT_JWT_SECRET: TEST_SECRET },
  });
  base = served.base;
  child = served.child;
  await waitUntil(async () => (await statusFrom("198.51.100.99")) === 200, "the gateway");
}, 30_000);

afterAll(async () => {
  child?.kill("SIGKILL");
  await origin?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("policy reload", () => {
  it("rebuilds the lists and the challenge from the new policy", async () => {
    // Minute windows on the real clock: the count must hold from the first request to the last.
    await withinOneWindow(60_000, 5_000);
    expect(await statusFrom("203.0.113.1")).toBe(403);
    expect(await statusFrom("203.0.113.2")).toBe(200);
    // Band 2: the third request of a client is challenged.
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push(await statusFrom("198.51.100.7"));
    expect(statuses).toEqual([200, 200, 302]);

    writeFileSync(join(dir, "policy.yaml"), policyWith(join(dir, "deny-b.txt"), 3));
    child.kill("SIGHUP");
    await waitUntil(async () => (await statusFrom("203.0.113.2")) === 403, "the new deny list");
    expect(await statusFrom("203.0.113.1")).toBe(200);
    // The limiter kept its counters across the reload: this client is still challenged.
    expect(await statusFrom("198.51.100.7")).toBe(302);
    expect(output()).toContain("policy reloaded; counters kept");
  }, 30_000);
});
