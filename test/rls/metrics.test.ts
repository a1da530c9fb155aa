import { describe, expect, it } from "vitest";
import { definePolicy } from "../../src/policy/load.js";
import { RlsMetrics } from "../../src/rls/metrics.js";

/** The calls counter counts in its own leaves and hands them to prom-client at each scrape. */

describe("edgelimit_rls_calls_total", () => {
  it("says every call at each scrape, by API and outcome, however many scrapes", async () => {
    const metrics = new RlsMetrics(definePolicy({ version: 1 }), () => 0);
    const value = async (api: string, code: string) => {
      const text = await metrics.registry.metrics();
      const line = new RegExp(
        `^edgelimit_rls_calls_total\\{api="${api}",code="${code}"\\} (\\d+)$`,
        "m",
      );
      return Number(line.exec(text)?.[1] ?? 0);
    };
    for (let i = 0; i < 3; i++) metrics.recordCall("grpc", "OK");
    metrics.recordCall("check", 200);
    expect(await value("grpc", "OK")).toBe(3);
    expect(await value("check", "200")).toBe(1);
    expect(await value("grpc", "OK")).toBe(3);
    metrics.recordCall("grpc", "OK");
    metrics.recordCall("grpc", "UNAVAILABLE");
    expect(await value("grpc", "OK")).toBe(4);
    expect(await value("grpc", "UNAVAILABLE")).toBe(1);
  });
});
