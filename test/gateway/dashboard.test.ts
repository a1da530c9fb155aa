import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { BrowserContext } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Gateway } from "../../src/gateway/server.js";
import { createLimiter } from "../../src/limiter.js";
import { loadPolicy, parsePolicy } from "../../src/policy/load.js";
import { memoryStore } from "../../src/stores/memory.js";
import { launchChromium } from "../support/chromium.js";
import { signToken } from "../support/jwt.js";
import { withinOneWindow } from "../support/windows.js";
import { startOrigin, TEST_SECRET, type TestServer, testGateway } from "./helpers.js";

/** The dashboard in Debian's Chromium, driven by playwright-core. */
const userDataDir = mkdtempSync(join(tmpdir(), "edgelimit-chromium-"));
let origin: TestServer;
let gateway: Gateway;
let browser: BrowserContext | undefined;
let base: string;
let adminUrl: string;

beforeAll(async () => {
  origin = await startOrigin((_req, res) => {
    res.writeHead(200, { "content-type": "text/plain" });
    res.end("ok");
  });
  gateway = testGateway(origin.url);
  const started = await gateway.start();
  base = started.url;
  adminUrl = started.adminUrl as string;
  // A fresh profile for every run: nothing from an earlier session leaks in.
  browser = await launchChromium(userDataDir);
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await gateway?.close();
  await origin?.close();
  rmSync(userDataDir, { recursive: true, force: true });
});

describe("the live dashboard", () => {
  it("shows the blocked figure rise while a client is being blocked", async () => {
    const page = await (browser as BrowserContext).newPage();
    const pageErrors: string[] = [];
    page.on("pageerror", (error) => pageErrors.push(error.message));
    const outside: string[] = [];
    page.on("request", (request) => {
      if (!request.url().startsWith(adminUrl)) outside.push(request.url());
    });
    await page.goto(adminUrl);
    await page.waitForSelector("#status:text('live')");
    expect(await page.textContent("#total-block")).toBe("0");
    // The chart rendered from the locally served uPlot.
    await page.waitForSelector("#chart canvas");

    for (let i = 0; i < 9; i++) {
      const response = await fetch(`${base}api/export`, {
        headers: { "x-forwarded-for": "203.0.113.5" },
      });
      await response.arrayBuffer();
    }
    // 3 per minute on /api/export: 6 blocked; the page learns it from its live feed.
    await page.waitForFunction(
      () => document.querySelector("#total-block")?.textContent === "6",
      undefined,
      {
        timeout: 10_000,
      },
    );
    expect(await page.textContent("#total-allow")).toBe("3");
    await page.waitForSelector("#offenders td:text('ip:203.0.113.5')");
    expect(await page.textContent("#rules")).toContain("anonymous.path./api/export");
    // The store's health, the failed-open count and the decision time, from the same feed.
    expect(await page.textContent("#store-state")).toBe("ok");
    expect(await page.textContent("#total-failed-open")).toBe("0");
    expect(await page.textContent("#total-failed-local")).toBe("0");
    expect(await page.textContent("#overrides-meta")).toBe("none in force");
    // The rules' "store down" column: the example policy counts locally.
    expect(await page.textContent("#rules")).toContain("local");
    await page.waitForFunction(
      () => document.querySelector("#decision-count")?.textContent === "9",
      undefined,
      { timeout: 10_000 },
    );
    expect(Number(await page.textContent("#decision-p99"))).toBeGreaterThanOrEqual(0);
    expect(pageErrors).toEqual([]);
    expect(outside).toEqual([]);
    await page.close();
  }, 60_000);

  it("shows the numbers at once, from the snapshot it was served with, before its live feed connects", async () => {
    // A user whose token's subject is markup is refused and becomes a top offender: the page
    // carries that key as data and shows it as text.
    const subject = "</script><script>window.injected = 1</script><!--";
    const token = await signToken({ sub: subject }, { secret: TEST_SECRET });
    for (let i = 0; i < 22; i++) {
      const response = await fetch(`${base}api/export`, {
        headers: { "x-forwarded-for": "203.0.113.6", authorization: `Bearer ${token}` },
      });
      await response.arrayBuffer();
    }
    const snapshot = (await (await fetch(`${adminUrl}api/snapshot`)).json()) as {
      totals: Record<string, number>;
    };
    expect(snapshot.totals.block).toBeGreaterThan(0);

    const page = await (browser as BrowserContext).newPage();
    const pageErrors: string[] = [];
    page.on("pageerror", (error) => pageErrors.push(error.message));
    // The live feed never connects.
    await page.route("**/events", (route) => route.abort());
    await page.goto(adminUrl);
    expect(await page.textContent("#status")).not.toBe("live");
    expect(await page.textContent("#total-block")).toBe(String(snapshot.totals.block));
    expect(await page.textContent("#total-allow")).toBe(String(snapshot.totals.allow));
    expect(await page.textContent("#rules")).toContain("anonymous.path./api/export");
    await page.waitForSelector("#chart canvas");
    expect(await page.textContent("#offenders")).toContain(`user:${subject}`);
    expect(await page.evaluate(() => (window as { injected?: number }).injected)).toBeUndefined();
    expect(pageErrors).toEqual([]);
    await page.close();
  }, 60_000);

  it("lists the overrides the gateway holds, soonest to expire first, an operator's markup as text", async () => {
    const store = memoryStore();
    // Another instance on the same store sets them; the gateway reads them as it starts.
    const admin = createLimiter({
      policy: loadPolicy("examples/policies/cloudfront.yaml"),
      store,
      env: { EDGELIMIT_JWT_SECRET: TEST_SECRET },
    });
    const subject = "user:</script><script>window.injected = 1</script>";
    const until = Date.now() + 30 * 60_000;
    await admin.overrides.set({ subject: "user:u_partner", plan: "pro", limit: 5000 });
    await admin.overrides.set({ subject, block: "leaked", until, note: "<b>ana</b> #7" });
    admin.close();
    const held = testGateway(origin.url, { store });
    const started = await held.start();
    const page = await (browser as BrowserContext).newPage();
    const pageErrors: string[] = [];
    page.on("pageerror", (error) => pageErrors.push(error.message));
    try {
      await page.goto(started.adminUrl as string);
      await page.waitForSelector("#overrides tr:nth-child(2)");
      const cells = await page.$$eval("#overrides tr", (rows) =>
        rows.map((tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent)),
      );
      expect(cells).toEqual([
        [
          subject,
          "all rules",
          "block: leaked",
          `${new Date(until).toISOString()} (in 30 min)`,
          "<b>ana</b> #7",
          expect.any(String),
        ],
        ["user:u_partner", "plan pro", "limit 5000", "never", "", expect.any(String)],
      ]);
      expect(await page.textContent("#overrides-meta")).toContain("2 in force");
      // Read-only: nothing on the page edits them.
      expect(await page.$$("input, button, form, select, textarea")).toEqual([]);
      expect(await page.evaluate(() => (window as { injected?: number }).injected)).toBeUndefined();
      expect(pageErrors).toEqual([]);
    } finally {
      await page.close();
      await held.close();
    }
  }, 60_000);

  it("shows what a shadow rule would have refused, in all and on the rule's row", async () => {
    const shadowGateway = testGateway(origin.url, {
      policy: parsePolicy(
        [
          "version: 1",
          "identity:",
          '  ip: { source: x-forwarded-for, trustedProxies: [127.0.0.0/8, "::1/128"] }',
          "defaults: { window: 1h }",
          "tiers:",
          "  anonymous:",
          "    global: 1000",
          "    paths:",
          "      /api/export: { limit: 2, shadow: true }",
          "",
        ].join("\n"),
      ),
    });
    const started = await shadowGateway.start();
    const page = await (browser as BrowserContext).newPage();
    const pageErrors: string[] = [];
    page.on("pageerror", (error) => pageErrors.push(error.message));
    try {
      await page.goto(started.adminUrl as string);
      await page.waitForSelector("#status:text('live')");
      expect(await page.textContent("#total-shadow")).toBe("0");
      await withinOneWindow(3_600_000, 20_000);
      const statuses: number[] = [];
      for (let i = 0; i < 6; i++) {
        const response = await fetch(`${started.url}api/export`, {
          headers: { "x-forwarded-for": "203.0.113.6" },
        });
        await response.arrayBuffer();
        statuses.push(response.status);
      }
      expect(new Set(statuses)).toEqual(new Set([200]));
      // 2 an hour: the last 4 would have been refused.
      await page.waitForFunction(
        () => document.querySelector("#total-shadow")?.textContent === "4",
        undefined,
        { timeout: 10_000 },
      );
      expect(await page.textContent("#total-block")).toBe("0");
      const row = await page.$$eval("#rules tr", (rows) =>
        rows
          .map((tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent))
          .find((cells) => cells[0]?.startsWith("anonymous.path./api/export")),
      );
      expect(row?.[0]).toBe("anonymous.path./api/export (shadow)");
      expect(row?.at(-1)).toBe("4");
      expect(pageErrors).toEqual([]);
    } finally {
      await page.close();
      await shadowGateway.close();
    }
  }, 60_000);
});
