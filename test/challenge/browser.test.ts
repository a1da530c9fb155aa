import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { BrowserContext } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium } from "../support/chromium.js";
import { type StartedServe, startServe } from "../support/serve-process.js";
import { HOUR_MS, withinOneWindow } from "../support/windows.js";

const LIMIT = 3;

/**
 * The limit counts in an hour's window, not the default minute's: the challenge test needs some
 * 20 s in one window (Chromium loads and solves the page), which only an hour's last 20 s do not
 * leave, where a minute's last 20 s are a third of every minute.
 */
const POLICY = `
version: 1
identity:
  ip:
    source: x-forwarded-for
    trustedProxies: [127.0.0.0/8, "::1/128"]
tiers:
  anonymous:
    global: { limit: ${LIMIT}, window: 1h, action: challenge, challengeBand: 4 }
challenge:
  path: /captcha
  secret: { env: EDGELIMIT_PASS_SECRET }
  difficulty: 10
  cookie: { secure: false }
lists:
  - { name: blocked, kind: deny, file: DENY_FILE }
`;

describe("challenge end to end in Chromium through edgelimit serve", () => {
  const dir = mkdtempSync(join(tmpdir(), "edgelimit-challenge-e2e-"));
  let origin: Server;
  let gateway: ChildProcess | undefined;
  let context: BrowserContext | undefined;
  let base = "";
  let admin = "";
  let denyFile = "";
  let served: StartedServe | undefined;

  beforeAll(async () => {
    origin = createServer((req, res) => {
      res.writeHead(200, { "content-type": "text/plain" });
      res.end(`origin saw ${req.url}`);
    });
    await new Promise<void>((resolve) => origin.listen(0, "127.0.0.1", resolve));
    const originUrl = `http://127.0.0.1:${(origin.address() as AddressInfo).port}`;
    const policyFile = join(dir, "policy.yaml");
    denyFile = join(dir, "deny.txt");
    writeFileSync(denyFile, "203.0.113.66\n");
    writeFileSync(policyFile, POLICY.replace("DENY_FILE", JSON.stringify(denyFile)));
    served = await startServe({
      policy: policyFile,
      upstream: originUrl,
      env: { EDGELIMIT_PASS_SECRET: "e2e-pass-secret" },
    });
    gateway = served.child;
    base = served.base;
    admin = served.admin;
    context = await launchChromium(join(dir, "profile"));
  }, 60_000);

  afterAll(async () => {
    await context?.close().catch(() => undefined);
    if (gateway !== undefined && gateway.exitCode === null) {
      const exited = new Promise((resolve) => gateway?.once("exit", resolve));
      gateway.kill("SIGTERM");
      await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 5000))]);
      if (gateway.exitCode === null) gateway.kill("SIGKILL");
    }
    await new Promise<void>((resolve) => origin?.close(() => resolve()));
    rmSync(dir, { recursive: true, force: true });
  });

  const get = (path: string, headers: Record<string, string> = {}) =>
    fetch(`${base}${path}`, { headers, redirect: "manual" });

  it("challenges past the limit, lets the page solve it, returns to the URI, and binds the pass to the IP", async () => {
    // The gateway counts on the real clock, per hour: the page must load in the same window.
    await withinOneWindow(HOUR_MS, 20_000);
    // The browser connects from 127.0.0.1 without X-Forwarded-For: its client IP is 127.0.0.1.
    for (let i = 0; i < LIMIT; i++) expect((await get("/warmup")).status).toBe(200);

    const page = await (context as BrowserContext).newPage();
    const statuses: [number, string][] = [];
    page.on("response", (response) => {
      statuses.push([response.status(), new URL(response.url()).pathname]);
    });
    await page.goto(`${base}/reports?q=edge%20limits&page=2`);
    await page.waitForURL(`${base}/reports?q=edge%20limits&page=2`, { timeout: 30_000 });
    expect(await page.textContent("body")).toBe("origin saw /reports?q=edge%20limits&page=2");
    expect(statuses).toContainEqual([302, "/reports"]);
    expect(statuses).toContainEqual([200, "/captcha"]);
    expect(statuses).toContainEqual([303, "/captcha/verify"]);

    const cookies = await (context as BrowserContext).cookies(base);
    const pass = cookies.find((cookie) => cookie.name === "edgelimit_pass");
    expect(pass?.httpOnly).toBe(true);
    expect(pass?.sameSite).toBe("Lax");
    const cookie = `edgelimit_pass=${pass?.value}`;

    // The holder passes on the same IP without being challenged again.
    expect((await get("/reports", { cookie })).status).toBe(200);

    // Another client IP (X-Forwarded-For from a loopback proxy is trusted) over its own limit
    // presents the same cookie: challenged again.
    const other = { "x-forwarded-for": "198.51.100.9" };
    for (let i = 0; i < LIMIT; i++) expect((await get("/warmup", other)).status).toBe(200);
    const stolen = await get("/reports", { ...other, cookie });
    expect(stolen.status).toBe(302);
    expect(stolen.headers.get("location")).toBe("/captcha?redirect=%2Freports");
    await page.close();
  }, 90_000);

  it("refuses a client on a refreshing deny list, follows file edits, and shows the list in /metrics", async () => {
    expect((await get("/", { "x-forwarded-for": "203.0.113.66" })).status).toBe(403);
    expect((await get("/", { "x-forwarded-for": "203.0.113.67" })).status).toBe(200);
    const metrics = async () => (await fetch(`${admin}/metrics`)).text();
    expect(await metrics()).toMatch(/edgelimit_list_size\{[^}]*name="blocked"[^}]*\} 1\n/);

    writeFileSync(denyFile, "203.0.113.66\n203.0.113.67\n");
    const deadline = Date.now() + 5000;
    while ((await get("/", { "x-forwarded-for": "203.0.113.67" })).status !== 403) {
      if (Date.now() > deadline) throw new Error("the edited deny list was not picked up");
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(await metrics()).toMatch(/edgelimit_list_size\{[^}]*name="blocked"[^}]*\} 2\n/);
    expect(await metrics()).toMatch(
      /edgelimit_list_refresh_errors\{[^}]*name="blocked"[^}]*\} 0\n/,
    );
  }, 30_000);

  it("never redirects off-site after a challenge", async () => {
    const page = await (context as BrowserContext).newPage();
    await page.goto(`${base}/captcha?redirect=${encodeURIComponent("//evil.example/steal")}`);
    await page.waitForURL((url) => url.pathname !== "/captcha", { timeout: 30_000 });
    expect(new URL(page.url()).origin).toBe(base);
    expect(new URL(page.url()).pathname).toBe("/");
    await page.close();
  }, 60_000);
});
