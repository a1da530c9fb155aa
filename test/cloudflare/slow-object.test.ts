/**
 * A Durable Object far from the isolate answers in more than a second, and the policy's budget
 * allows for it (docs/cloudflare.md, "Time budget"): in the real workerd runtime, the handler's
 * calls to the object wait as long as the budget does, so the exact rule counts in the object,
 * instead of each call failing at a fixed 1 s and the rule's fail mode answering (503 here).
 */
import { describe, expect, it } from "vitest";
import { counterKey, subjectKey } from "../../src/core/keys.js";
import { parsePolicy } from "../../src/policy/load.js";
import { HOUR_MS } from "../support/windows.js";
import { withinOneWindow, workerInSuite } from "./harness.js";

/** Past the object's old fixed call timeout (1 s), and below the budget. */
const DELAY_MS = 1300;
const BUDGET_MS = 3000;

const POLICY = `
version: 1
budget: ${BUDGET_MS}
identity:
  ip: { source: header, header: cf-connecting-ip }
namespaces:
  quota:
    match: { path: /quota }
    key: ip
    limit: 2
    window: 1h
    backend: exact
    failMode: closed
`;

describe("a Durable Object slower than a second, with a budget that allows for it, in workerd", () => {
  const worker = workerInSuite(
    parsePolicy(POLICY, "slow.yaml"),
    "test/cloudflare/fixtures/silent-worker.ts",
    "SilentCounter",
  );

  it("waits for the object within the budget and counts there", async () => {
    // Four calls of some 1.3 s each: they must not straddle two of the rule's windows.
    await withinOneWindow(HOUR_MS, 20_000);
    const ip = "198.51.100.9";
    const key = encodeURIComponent(counterKey(subjectKey("ip", ip), "quota", "quota"));
    expect((await worker().dispatch(`/__slow?key=${key}&ms=${DELAY_MS}`)).status).toBe(200);
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) {
      const started = performance.now();
      const response = await worker().dispatch("/quota", { ip });
      statuses.push(response.status);
      // The answer came from the object, after its delay, not from a timeout before it.
      expect(performance.now() - started).toBeGreaterThanOrEqual(DELAY_MS - 50);
    }
    // The object's count: 2 admitted, then the limit (a failed call would answer 503).
    expect(statuses).toEqual([200, 200, 429]);
  }, 40_000);
});
