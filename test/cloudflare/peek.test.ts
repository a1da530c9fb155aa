/**
 * `cloudflareLimiter(...).peek` in workerd: an exact rule reports its Durable Object's count
 * and a peek writes nothing there; a rule on the native binding has no count to tell.
 */
import { describe, expect, it } from "vitest";
import type { Peek } from "../../src/core/peek.js";
import { parsePolicy } from "../../src/policy/load.js";
import { tokenFor, workerInSuite } from "./harness.js";

const POLICY = `
version: 1
identity:
  ip: { source: header, header: cf-connecting-ip }
  user:
    jwt:
      algorithms: [HS256]
      secret: { env: EDGELIMIT_JWT_SECRET }
      userClaim: sub
      planClaim: plan
namespaces:
  api:
    match: { path: /api/ }
    rules:
      - name: rate
        key: user-or-ip
        limit: 100
        window: 60s
        backend: approximate
      - name: pro-monthly
        key: user
        plans: [pro]
        limit: 30
        window: 1mo
        backend: exact
`;

describe("peek on Cloudflare Workers, in workerd", () => {
  const worker = workerInSuite(
    parsePolicy(POLICY, "peek.yaml"),
    "test/cloudflare/fixtures/inspectable-worker.ts",
    "InspectableCounter",
  );

  it("reports the object's count and the binding's none, counting nothing", async () => {
    const token = await tokenFor("u_peek", "pro");
    const as = (path: string) =>
      worker().dispatch(path, {
        ip: "203.0.113.81",
        headers: { authorization: `Bearer ${token}` },
      });
    for (let i = 0; i < 5; i++) expect((await as("/api/data")).status).toBe(200);
    const peeks: Peek[] = [];
    for (let i = 0; i < 20; i++) peeks.push(JSON.parse((await as("/__peek/api/data")).body));
    const last = peeks.at(-1) as Peek;
    expect(last.reason).toBe("matched");
    expect(last.storeError).toBeUndefined();
    const byRule = Object.fromEntries(last.rules.map((rule) => [rule.rule, rule]));
    expect(byRule["api.pro-monthly"]).toMatchObject({ limit: 30, remaining: 25 });
    expect(byRule["api.rate"]).toMatchObject({ limit: 100, countUnknown: true });
    // Nothing was counted: the next request is the sixth of the month.
    const next = await as("/api/data");
    expect(next.status).toBe(200);
    expect(next.headers.get("x-ratelimit-remaining")).toBe("24");
  }, 30_000);
});
