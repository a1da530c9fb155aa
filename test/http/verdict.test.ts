/**
 * A verdict carries the engine's decision rather than a copy of its fields: the fields a
 * decision has are read from `verdict.decision`, and only the HTTP response is the verdict's.
 */
import { describe, expect, it } from "vitest";
import { createLimiter } from "../../src/limiter.js";
import { definePolicy } from "../../src/policy/load.js";
import { memoryStore } from "../../src/stores/memory.js";

const T0 = Date.UTC(2026, 10, 30, 12, 0, 10);

function limiterOf() {
  return createLimiter({
    policy: definePolicy({
      tiers: { anonymous: { global: { limit: 2, window: "60s" } } },
      namespaces: { login: { match: { path: "/login" }, key: "ip", limit: 1, disclose: false } },
    }),
    store: memoryStore(),
    clock: () => T0,
  });
}

describe("a verdict", () => {
  it("carries its decision, with the rules that matched and the deciding rule itself", async () => {
    const verdict = await limiterOf().check({ ip: "192.0.2.1", path: "/login" });
    const { decision } = verdict;
    expect(decision.rules.map((rule) => rule.id)).toEqual(verdict.outcomes.map((o) => o.ruleId));
    expect(decision.rule?.id).toBe(verdict.rule);
    expect(decision.outcome?.state.remaining).toBe(verdict.remaining);
    expect(decision.outcome?.state.remaining).toBe(1);
  });

  it("reads the decision's fields from it rather than holding copies", async () => {
    const limiter = limiterOf();
    await limiter.check({ ip: "192.0.2.2", path: "/" });
    await limiter.check({ ip: "192.0.2.2", path: "/" });
    const verdict = await limiter.check({ ip: "192.0.2.2", path: "/" });
    const { decision } = verdict;
    expect(verdict).toMatchObject({
      action: decision.action,
      reason: decision.reason,
      retryAfterSeconds: decision.retryAfterSeconds,
      tier: decision.tier,
      subject: decision.subject,
      path: decision.path,
      shadowed: decision.shadowed,
      durationMs: decision.durationMs,
    });
    expect(verdict.outcomes).toBe(decision.outcomes);
    expect(Object.keys(verdict).sort()).toEqual(
      ["body", "decision", "headers", "location", "originHeaders", "status"].sort(),
    );
  });

  it("is written to JSON with every field a log line reads, and without the decision", async () => {
    const verdict = await limiterOf().check({ ip: "192.0.2.3", path: "/" });
    const written = JSON.parse(JSON.stringify(verdict));
    expect(written).toMatchObject({
      action: "allow",
      reason: "within-limit",
      status: 200,
      limit: 2,
      remaining: 1,
      rule: "anonymous.global",
      tier: "anonymous",
      subject: "ip:192.0.2.3",
      path: "/",
    });
    expect(written).not.toHaveProperty("decision");
  });
});
