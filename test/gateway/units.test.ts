import type { IncomingMessage } from "node:http";
import { describe, expect, it } from "vitest";
import { EdgelimitError } from "../../src/core/errors.js";
import { GatewayMetrics } from "../../src/gateway/metrics.js";
import { requestHeaders } from "../../src/gateway/proxy.js";
import type { Verdict } from "../../src/http/respond.js";
import { RecentHeavyHitters, SpaceSaving } from "../../src/ops/heavy-hitters.js";
import { RateSeries } from "../../src/ops/rate-series.js";
import { parsePolicy } from "../../src/policy/load.js";
import { storeFromUrl } from "../../src/stores/from-url.js";
import { redact } from "../../src/stores/redact.js";

describe("SpaceSaving", () => {
  it("keeps a heavy key on top through a flood of one-off keys, in bounded slots", () => {
    const sketch = new SpaceSaving(10);
    for (let i = 0; i < 5_000; i++) {
      sketch.offer("ip:203.0.113.66");
      sketch.offer(`ip:10.0.${i >> 8}.${i & 255}`);
    }
    expect(sketch.size).toBe(10);
    const [top] = sketch.top(1);
    expect(top?.key).toBe("ip:203.0.113.66");
    // Counts never under-estimate, and over-estimate by at most the recorded error.
    expect(top?.count).toBeGreaterThanOrEqual(5_000);
    expect((top?.count ?? 0) - (top?.error ?? 0)).toBeLessThanOrEqual(5_000);
    expect(sketch.total).toBe(10_000);
  });

  it("counts exactly while the keys fit", () => {
    const sketch = new SpaceSaving(3);
    for (const key of ["a", "b", "a", "c", "a", "b"]) sketch.offer(key);
    expect(sketch.top()).toEqual([
      { key: "a", count: 3, error: 0 },
      { key: "b", count: 2, error: 0 },
      { key: "c", count: 1, error: 0 },
    ]);
  });
});

describe("RecentHeavyHitters", () => {
  const MINUTE = 60_000;

  it("sums the filling period and the one before it, and forgets older offenders", () => {
    const recent = new RecentHeavyHitters(10, MINUTE);
    const start = 100 * MINUTE;
    for (let i = 0; i < 50; i++) recent.offer("ip:198.51.100.1", start + i);
    for (let i = 0; i < 20; i++) recent.offer("ip:198.51.100.2", start + MINUTE + i);
    for (let i = 0; i < 5; i++) recent.offer("ip:198.51.100.1", start + MINUTE + 100 + i);
    expect(recent.top(10, start + MINUTE + 1_000)).toEqual([
      { key: "ip:198.51.100.1", count: 55, error: 0 },
      { key: "ip:198.51.100.2", count: 20, error: 0 },
    ]);
    // A period later only the second period's refusals are left; one more and nothing is.
    expect(recent.top(10, start + 2 * MINUTE)).toEqual([
      { key: "ip:198.51.100.2", count: 20, error: 0 },
      { key: "ip:198.51.100.1", count: 5, error: 0 },
    ]);
    expect(recent.top(10, start + 3 * MINUTE)).toEqual([]);
  });

  it("starts afresh after a long quiet spell", () => {
    const recent = new RecentHeavyHitters(10, MINUTE);
    recent.offer("ip:198.51.100.3", 0);
    recent.offer("ip:198.51.100.4", 10 * MINUTE);
    expect(recent.top(10, 10 * MINUTE).map((hitter) => hitter.key)).toEqual(["ip:198.51.100.4"]);
  });
});

describe("GatewayMetrics", () => {
  it("counts each decision under its own labels, when only one label changes between two", async () => {
    const policy = parsePolicy("version: 1\ntiers:\n  anonymous:\n    global: 10\n");
    const metrics = new GatewayMetrics(policy, { blockCacheHits: () => 0, listStats: () => [] });
    const labels = (action: string, reason: string, tier: string, rule: string) =>
      ({ action, reason, tier, rule, durationMs: 0.01, shadowed: [] }) as unknown as Verdict;
    const base = ["allow", "allowed", "anonymous", "anonymous.global"] as const;
    // Each decision differs from the one before it in exactly one label, then repeats.
    const sequence = [
      labels(...base),
      labels("block", "allowed", "anonymous", "anonymous.global"),
      labels(...base),
      labels("allow", "over-limit", "anonymous", "anonymous.global"),
      labels(...base),
      labels("allow", "allowed", "authenticated", "anonymous.global"),
      labels(...base),
      labels("allow", "allowed", "anonymous", "authenticated.global"),
      labels(...base),
    ];
    for (const decision of sequence) metrics.recordDecision(decision);
    const text = await metrics.text();
    const count = (action: string, reason: string, tier: string, rule: string) =>
      Number(
        text
          .split("\n")
          .find((line) =>
            line.startsWith(
              `edgelimit_decisions_total{action="${action}",reason="${reason}",tier="${tier}",rule="${rule}",`,
            ),
          )
          ?.split(" ")
          .at(-1),
      );
    expect(count(...base)).toBe(5);
    expect(count("block", "allowed", "anonymous", "anonymous.global")).toBe(1);
    expect(count("allow", "over-limit", "anonymous", "anonymous.global")).toBe(1);
    expect(count("allow", "allowed", "authenticated", "anonymous.global")).toBe(1);
    expect(count("allow", "allowed", "anonymous", "authenticated.global")).toBe(1);
    expect(text).toContain("edgelimit_decision_duration_seconds_count 9");
  });

  it("hands every decision to each scrape, and keeps those counted before a reload", async () => {
    const policy = parsePolicy("version: 1\ntiers:\n  anonymous:\n    global: 10\n");
    const metrics = new GatewayMetrics(policy, { blockCacheHits: () => 0, listStats: () => [] });
    const allowed = {
      action: "allow",
      reason: "within-limit",
      tier: "anonymous",
      rule: "anonymous.global",
      durationMs: 0,
      shadowed: [],
    } as unknown as Verdict;
    const line = (text: string) =>
      text.split("\n").find((entry) => entry.startsWith("edgelimit_decisions_total{"));
    for (let i = 0; i < 3; i++) metrics.recordDecision(allowed);
    expect(line(await metrics.text())).toMatch(/ 3$/);
    for (let i = 0; i < 4; i++) metrics.recordDecision(allowed);
    expect(line(await metrics.text())).toMatch(/ 7$/);
    metrics.recordDecision(allowed);
    metrics.usePolicy(parsePolicy("version: 1\ntiers:\n  anonymous:\n    global: 20\n"));
    metrics.recordDecision(allowed);
    expect(line(await metrics.text())).toMatch(/ 9$/);
  });
});

describe("RateSeries", () => {
  it("buckets decisions per second and forgets seconds that scrolled out", () => {
    const series = new RateSeries(5);
    series.record("block", 10_100);
    series.record("block", 10_900);
    series.record("allow", 11_000);
    series.record("allow", 2_000); // an old second sharing slot 2 with second 12
    const samples = series.samples(12_500);
    expect(samples.map((sample) => sample.at)).toEqual([8, 9, 10, 11, 12]);
    expect(samples[2]).toMatchObject({ block: 2, allow: 0 });
    expect(samples[3]).toMatchObject({ allow: 1 });
    expect(samples[4]).toMatchObject({ allow: 0 });
  });
});

describe("storeFromUrl", () => {
  it("opens the memory store", async () => {
    const store = await storeFromUrl("memory");
    expect(store.name).toBe("memory");
    expect(store.traits?.applySync).toBeTypeOf("function");
  });

  it("rejects an unknown scheme with a message that lists the choices", async () => {
    const attempt = storeFromUrl("mongodb://user:pw@host/db");
    await expect(attempt).rejects.toBeInstanceOf(EdgelimitError);
    await expect(attempt).rejects.toThrow(/use memory, redis:\/\/HOST:PORT/);
    await expect(attempt).rejects.not.toThrow(/pw/);
  });

  it("hides credentials", () => {
    expect(redact("redis://:hunter2@10.0.0.1:6379")).toBe("redis://***@10.0.0.1:6379");
  });
});

describe("requestHeaders", () => {
  const request = (headers: Record<string, string | string[]>, peer?: string) =>
    ({ headers, socket: { remoteAddress: peer } }) as unknown as IncomingMessage;
  /** The flat list as name -> values, in order. */
  const lines = (list: string[]) => {
    const byName = new Map<string, string[]>();
    for (let i = 0; i < list.length; i += 2) {
      const name = list[i] as string;
      byName.set(name, [...(byName.get(name) ?? []), list[i + 1] as string]);
    }
    return byName;
  };

  it("drops hop-by-hop and listed headers, replaces ours and appends the peer to X-Forwarded-For", () => {
    const out = lines(
      requestHeaders(
        request(
          {
            host: "example.test",
            connection: "keep-alive, x-secret",
            "keep-alive": "timeout=5",
            "x-secret": "hop",
            "transfer-encoding": "chunked",
            "x-ratelimit-remaining": "1000",
            "x-other-ours": "forged",
            "set-cookie": ["a=1", "b=2"],
            "x-forwarded-for": "203.0.113.9",
          },
          "::ffff:127.0.0.1",
        ),
        { "x-ratelimit-remaining": "7", "x-other-ours": "real" },
        "x-ratelimit-remaining",
      ),
    );
    expect([...out.keys()].sort()).toEqual([
      "host",
      "set-cookie",
      "x-forwarded-for",
      "x-other-ours",
      "x-ratelimit-remaining",
    ]);
    expect(out.get("x-ratelimit-remaining")).toEqual(["7"]);
    expect(out.get("x-other-ours")).toEqual(["real"]);
    expect(out.get("set-cookie")).toEqual(["a=1", "b=2"]);
    expect(out.get("x-forwarded-for")).toEqual(["203.0.113.9, 127.0.0.1"]);
  });

  it("strips the origin header even when no count is disclosed, and keeps X-Forwarded-For without a peer", () => {
    const out = lines(
      requestHeaders(
        request({ "x-ratelimit-remaining": "1000", "x-forwarded-for": "203.0.113.9" }),
        {},
        "x-ratelimit-remaining",
      ),
    );
    expect([...out.entries()]).toEqual([["x-forwarded-for", ["203.0.113.9"]]]);
  });
});
