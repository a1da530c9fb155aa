import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type StartedServe, startServe } from "../support/serve-process.js";
import { withinOneWindow } from "../support/windows.js";
import { startOrigin, type TestServer } from "./helpers.js";

/**
 * A policy's `shadow: true` rule in the real `edgelimit serve`: every request it would have
 * refused reaches the origin, and the operator sees each one in /metrics
 * (`edgelimit_shadow_refusals_total`), the dashboard's snapshot and the decision log, which logs
 * every one of them at the default sampling of allowed decisions.
 */

const dir = mkdtempSync(join(tmpdir(), "edgelimit-shadow-"));
let origin: TestServer;
let served: StartedServe | undefined;
let base: string;
let admin: string;
let reached = 0;

beforeAll(async () => {
  origin = await startOrigin((_req, res) => {
    reached++;
    res.end("origin");
  });
  writeFileSync(
    join(dir, "policy.yaml"),
    [
      "version: 1",
      "identity:",
      '  ip: { source: x-forwarded-for, trustedProxies: [127.0.0.0/8, "::1/128"] }',
      "defaults: { window: 1h }",
      "tiers:",
      "  anonymous:",
      "    global: 1000",
      "    paths:",
      "      /api/export: { limit: 3, shadow: true }",
      "",
    ].join("\n"),
  );
  served = await startServe({ policy: join(dir, "policy.yaml"), upstream: origin.url });
  base = served.base;
  admin = served.admin;
}, 30_000);

afterAll(async () => {
  served?.child.kill("SIGKILL");
  await origin?.close();
  rmSync(dir, { recursive: true, force: true });
});

const decisionLines = (): Record<string, unknown>[] =>
  (served?.output() ?? "")
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((entry) => entry.msg === "decision");

describe("a shadow rule in edgelimit serve", () => {
  it("admits every request and shows each one it would have refused", async () => {
    await withinOneWindow(3_600_000, 30_000);
    const statuses = [];
    for (let i = 0; i < 8; i++) {
      const response = await fetch(`${base}/api/export`, {
        headers: { "x-forwarded-for": "203.0.113.44" },
      });
      await response.arrayBuffer();
      statuses.push(response.status);
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 200, 200, 200]);
    expect(reached).toBe(8);

    const metrics = await (await fetch(`${admin}/metrics`)).text();
    expect(metrics).toContain(
      'edgelimit_shadow_refusals_total{rule="anonymous.path./api/export",path="/api/export"} 5',
    );
    // The decisions are what they were: admitted, within the enforced global limit.
    expect(metrics).toContain(
      'edgelimit_decisions_total{action="allow",reason="within-limit",tier="anonymous",rule="anonymous.global",path="*"} 8',
    );

    const snapshot = (await (await fetch(`${admin}/api/snapshot`)).json()) as {
      decisions: { shadowRefusals: number; shadowRefusalsByRule: Record<string, number> };
    };
    expect(snapshot.decisions.shadowRefusals).toBe(5);
    expect(snapshot.decisions.shadowRefusalsByRule).toEqual({ "anonymous.path./api/export": 5 });

    // The log is written as the requests are answered; give its pipe a moment.
    const deadline = Date.now() + 5_000;
    while (decisionLines().length < 5 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const shadowed = decisionLines().filter((entry) => entry.shadowed !== undefined);
    expect(shadowed).toHaveLength(5);
    for (const entry of shadowed) {
      expect(entry).toMatchObject({
        level: 30,
        action: "allow",
        status: 200,
        subject: "ip:203.0.113.44",
        path: "/api/export",
        shadowed: ["anonymous.path./api/export"],
      });
    }
  });
});
