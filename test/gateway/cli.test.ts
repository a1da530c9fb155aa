import type { ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type StartedServe, startServe } from "../support/serve-process.js";
import { HOUR_MS, withHourWindows, withinOneWindow } from "../support/windows.js";
import { startOrigin, TEST_SECRET, type TestServer } from "./helpers.js";

/**
 * The real CLI in a child process: `node --import tsx src/cli/main.ts serve ...`, driven with
 * signals as an operator would.
 */
/**
 * The example policy with hour windows: a test needs some 15 s in one window (a reload on a busy
 * machine), which only an hour's last 15 s do not leave, where a minute's last 15 s are a
 * quarter of every minute. Each test counts a client address of its own.
 */
const example = withHourWindows(readFileSync("examples/policies/cloudfront.yaml", "utf8"));
const dir = mkdtempSync(join(tmpdir(), "edgelimit-gw-"));
const policyFile = join(dir, "policy.yaml");

let origin: TestServer;
let child: ChildProcess | undefined;
let served: StartedServe | undefined;
const output = (): string => served?.output() ?? "";
let base: string;

function logLines(): Record<string, unknown>[] {
  return output()
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

async function waitFor(predicate: () => boolean, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}; output:\n${output()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function statusOf(path: string, ip: string): Promise<number> {
  const response = await fetch(`${base}${path}`, { headers: { "x-forwarded-for": ip } });
  await response.arrayBuffer();
  return response.status;
}

beforeAll(async () => {
  origin = await startOrigin((req, res) => {
    const delay = req.url?.startsWith("/slow") ? 800 : 0;
    setTimeout(() => {
      res.writeHead(200, { "content-type": "text/plain" });
      res.end(`origin ${req.url}`);
    }, delay);
  });
  writeFileSync(policyFile, example);
  served = await startServe({
    policy: policyFile,
    upstream: origin.url,
    args: ["--log-sample", "0"],
    env: { EDGELIMIT_JWT_SECRET: TEST_SECRET, EDGELIMIT_CHALLENGE_SECRET: TEST_SECRET },
  });
  base = served.base;
  child = served.child;
}, 30_000);

afterAll(async () => {
  if (child !== undefined && child.exitCode === null) {
    child.kill("SIGKILL");
    await new Promise((resolve) => child?.once("exit", resolve));
  }
  await origin?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("edgelimit serve (the real CLI)", () => {
  it("reloads on SIGHUP and keeps the counters", async () => {
    // The spawned gateway counts on the real clock, in hour windows.
    await withinOneWindow(HOUR_MS, 15_000);
    const ip = "192.0.2.10";
    for (let i = 0; i < 4; i++) expect(await statusOf("/api/reports", ip)).toBe(200);

    // Raise /api/reports from 5 to 7 a window: 4 are spent, so 3 more pass, not 7.
    writeFileSync(policyFile, example.replace("/api/reports: 5", "/api/reports: 7"));
    child?.kill("SIGHUP");
    await waitFor(
      () => logLines().some((line) => line.msg === "policy reloaded; counters kept"),
      "the reload",
    );
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push(await statusOf("/api/reports", ip));
    expect(statuses).toEqual([200, 200, 200, 429]);
  }, 30_000);

  it("refuses a broken policy with a clear log line and keeps the running one", async () => {
    const before = logLines().length;
    writeFileSync(policyFile, example.replace("/api/export: 3", "/api/export: lots"));
    child?.kill("SIGHUP");
    await waitFor(
      () =>
        logLines()
          .slice(before)
          .some((line) => line.msg === "policy reload refused; the running policy stays"),
      "the refusal",
    );
    const refusal = logLines()
      .slice(before)
      .find((line) => line.msg === "policy reload refused; the running policy stays");
    expect(refusal?.level).toBe(50);
    expect(JSON.stringify(refusal?.error)).toContain("/api/export");
    await withinOneWindow(HOUR_MS, 10_000);
    // The running policy (export: 3) still applies.
    const ip = "192.0.2.11";
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push(await statusOf("/api/export", ip));
    expect(statuses).toEqual([200, 200, 200, 429]);
  }, 30_000);

  it("drains in-flight requests on SIGTERM, then exits 0", async () => {
    const inFlight = fetch(`${base}/slow`, { headers: { "x-forwarded-for": "192.0.2.12" } });
    await new Promise((resolve) => setTimeout(resolve, 200));
    const exited = new Promise<number | null>((resolve) =>
      child?.once("exit", (code) => resolve(code)),
    );
    child?.kill("SIGTERM");
    const response = await inFlight;
    expect(response.status).toBe(200);
    expect(await response.text()).toBe("origin /slow");
    expect(await exited).toBe(0);
    expect(logLines().some((line) => line.msg === "stopped")).toBe(true);
    // Nothing listens any more.
    await expect(fetch(`${base}/`)).rejects.toThrow();
  }, 30_000);
});
