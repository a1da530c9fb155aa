import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { withinOneWindow } from "../support/windows.js";
import { type RlsProcess, startRls } from "./harness.js";

/**
 * What shadow mode would have refused, as `edgelimit rls` shows it: a `shadow_mode` descriptor,
 * every limit under `SHADOW_MODE=true`, and a policy's shadow rule, each called past its limit
 * through `POST /json`. Every call is answered OK; /metrics counts each call a shadow limit would
 * have refused in `edgelimit_shadow_refusals_total`, and the dashboard's snapshot shows them.
 */

const dir = mkdtempSync(join(tmpdir(), "edgelimit-rls-shadow-"));
let rls: RlsProcess;
let global: RlsProcess;

beforeAll(async () => {
  writeFileSync(
    join(dir, "shadow.yaml"),
    [
      "domain: shadow",
      "descriptors:",
      "  - key: client",
      "    shadow_mode: true",
      "    rate_limit: { unit: hour, requests_per_unit: 3 }",
      "  - key: tenant",
      "    rate_limit: { unit: hour, requests_per_unit: 1000 }",
      "",
    ].join("\n"),
  );
  writeFileSync(
    join(dir, "policy.yaml"),
    [
      "version: 1",
      "identity:",
      '  ip: { source: x-forwarded-for, trustedProxies: [127.0.0.0/8, "::1/128"] }',
      "defaults: { window: 1h }",
      "tiers:",
      "  anonymous:",
      "    paths:",
      "      /api/: { limit: 2, shadow: true }",
      "",
    ].join("\n"),
  );
  writeFileSync(
    join(dir, "global.yaml"),
    "domain: everything\ndescriptors:\n  - key: client\n    rate_limit: { unit: hour, requests_per_unit: 2 }\n",
  );
  [rls, global] = await Promise.all([
    startRls(["--config", join(dir, "shadow.yaml"), "--policy", join(dir, "policy.yaml")]),
    startRls(["--config", join(dir, "global.yaml")], { env: { SHADOW_MODE: "true" } }),
  ]);
}, 60_000);

afterAll(async () => {
  await Promise.all([rls?.stop(), global?.stop()]);
  rmSync(dir, { recursive: true, force: true });
});

async function call(server: RlsProcess, body: unknown): Promise<string> {
  const response = await fetch(`http://127.0.0.1:${server.httpPort}/json`, {
    method: "POST",
    body: JSON.stringify(body),
  });
  expect(response.status).toBe(200);
  return ((await response.json()) as { overallCode: string }).overallCode;
}

async function metricsOf(server: RlsProcess): Promise<string> {
  return (await fetch(`${server.adminUrl}metrics`)).text();
}

interface Snapshot {
  decisions: { shadowRefusals: number; shadowRefusalsByRule: Record<string, number> };
}

async function snapshotOf(server: RlsProcess): Promise<Snapshot> {
  return (await (await fetch(`${server.adminUrl}api/snapshot`)).json()) as Snapshot;
}

describe("shadow mode in rls's metrics and dashboard", () => {
  it("counts each call a shadow_mode descriptor would have refused, by descriptor", async () => {
    await withinOneWindow(3_600_000, 30_000);
    const codes = [];
    for (let i = 0; i < 33; i++) {
      codes.push(
        await call(rls, {
          domain: "shadow",
          descriptors: [
            { entries: [{ key: "client", value: "203.0.113.9" }] },
            { entries: [{ key: "tenant", value: "acme" }] },
          ],
        }),
      );
    }
    expect(new Set(codes)).toEqual(new Set(["OK"]));
    const metrics = await metricsOf(rls);
    expect(metrics).toContain('edgelimit_shadow_refusals_total{rule="shadow.client",path="-"} 30');
    // The tenant's limit was never reached: no line for it.
    expect(metrics).not.toContain('edgelimit_shadow_refusals_total{rule="shadow.tenant"');
    // The decisions themselves are what they were: admitted, within every enforced limit.
    expect(metrics).toContain(
      'edgelimit_decisions_total{action="allow",reason="within-limit",tier="anonymous",rule="shadow.tenant",path="-"} 33',
    );
    const { decisions } = await snapshotOf(rls);
    expect(decisions.shadowRefusalsByRule["shadow.client"]).toBe(30);
  });

  it("counts each call a policy's shadow rule would have refused, with the rule's path", async () => {
    await withinOneWindow(3_600_000, 30_000);
    const codes = [];
    for (let i = 0; i < 5; i++) {
      codes.push(
        await call(rls, {
          domain: "web",
          descriptors: [
            {
              entries: [
                { key: "remote_address", value: "198.51.100.4" },
                { key: ":path", value: "/api/orders" },
              ],
            },
          ],
        }),
      );
    }
    expect(codes).toEqual(["OK", "OK", "OK", "OK", "OK"]);
    expect(await metricsOf(rls)).toContain(
      'edgelimit_shadow_refusals_total{rule="anonymous.path./api/",path="/api/"} 3',
    );
    const { decisions } = await snapshotOf(rls);
    expect(decisions.shadowRefusalsByRule["anonymous.path./api/"]).toBe(3);
  });

  it("counts under SHADOW_MODE=true each call that would have been OVER_LIMIT", async () => {
    await withinOneWindow(3_600_000, 30_000);
    const codes = [];
    for (let i = 0; i < 5; i++) {
      codes.push(
        await call(global, {
          domain: "everything",
          descriptors: [{ entries: [{ key: "client", value: "192.0.2.1" }] }],
        }),
      );
    }
    expect(codes).toEqual(["OK", "OK", "OK", "OK", "OK"]);
    expect(await metricsOf(global)).toContain(
      'edgelimit_shadow_refusals_total{rule="everything.client",path="-"} 3',
    );
    expect((await snapshotOf(global)).decisions.shadowRefusals).toBe(3);
  });
});
