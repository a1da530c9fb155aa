/**
 * A Durable Object that takes calls and never answers them (an object stuck behind a long
 * operation, a location that stopped serving), in the real workerd runtime: each decision waits
 * at most the budget, the rule counts in the isolate against its own limit (`failMode: local`,
 * the default) or answers 503 (`closed`), the breaker opens after its failures and decisions
 * stop waiting, and once the object answers again it counts again, paid what the isolate
 * admitted meanwhile, so the window's limit is not admitted a second time.
 */
import { describe, expect, it } from "vitest";
import { counterKey, subjectKey } from "../../src/core/keys.js";
import { parsePolicy } from "../../src/policy/load.js";
import { HOUR_MS } from "../support/windows.js";
import { tally, withinOneWindow, workerInSuite } from "./harness.js";

/** The decision budget: roomy, so that a healthy object under a loaded machine stays within it. */
const BUDGET_MS = 300;
/** workerd's own dispatch, and timers on a machine shared by other suites. */
const SLACK_MS = 250;

/**
 * Windows of an hour: the first test needs some 10 s in one window, which only an hour's last
 * 10 s do not leave, where a minute's last 10 s are a sixth of every minute.
 */
const POLICY = `
version: 1
budget: ${BUDGET_MS}
identity:
  ip: { source: header, header: cf-connecting-ip }
namespaces:
  burst:
    match: { path: /burst }
    key: ip
    limit: 3
    window: 1h
    backend: exact
  critical:
    match: { path: /critical }
    key: ip
    limit: 100
    window: 1h
    backend: exact
    failMode: closed
`;

describe("a Durable Object that never answers, in workerd", () => {
  const worker = workerInSuite(
    parsePolicy(POLICY, "silent.yaml"),
    "test/cloudflare/fixtures/silent-worker.ts",
    "SilentCounter",
  );

  const objectKey = (ip: string, namespace: string) =>
    counterKey(subjectKey("ip", ip), namespace, namespace);

  async function timed(path: string, ip: string): Promise<{ status: number; ms: number }> {
    const started = performance.now();
    const response = await worker().dispatch(path, { ip });
    return { status: response.status, ms: performance.now() - started };
  }

  it("counts in the isolate within the budget, stops waiting once the breaker opens, and the object is paid when it answers again", async () => {
    // The test takes about 4 s: it must not straddle two of the rule's windows.
    await withinOneWindow(HOUR_MS, 10_000);
    const ip = "198.51.100.7";
    const key = encodeURIComponent(objectKey(ip, "burst"));
    // The object counts while it answers.
    expect((await timed("/burst", ip)).status).toBe(200);

    expect((await worker().dispatch(`/__silence?key=${key}`)).status).toBe(200);
    const silent: { status: number; ms: number }[] = [];
    for (let i = 0; i < 12; i++) silent.push(await timed("/burst", ip));
    // The isolate's own count: the rule's 3, from zero (it does not know the object's 1).
    expect(tally(silent.map((answer) => answer.status))).toEqual({ 200: 3, 429: 9 });
    for (const answer of silent) expect(answer.ms).toBeLessThan(BUDGET_MS + SLACK_MS);
    // Five calls timed out (1 s each) and opened the breaker: of 20 concurrent decisions now, at
    // most one (the breaker's probe) is sent to the object and waits; the others do not.
    const held = async () =>
      (JSON.parse((await worker().dispatch(`/__held?key=${key}`)).body) as { held: number }).held;
    const heldBefore = await held();
    expect(heldBefore).toBeGreaterThanOrEqual(5);
    const open = await Promise.all(Array.from({ length: 20 }, () => timed("/burst", ip)));
    expect(tally(open.map((answer) => answer.status))).toEqual({ 429: 20 });
    for (const answer of open) expect(answer.ms).toBeLessThan(BUDGET_MS + SLACK_MS);
    expect((await held()) - heldBefore).toBeLessThanOrEqual(1);

    const spoken = await worker().dispatch(`/__speak?key=${key}`);
    expect((JSON.parse(spoken.body) as { held: number }).held).toBeGreaterThanOrEqual(5);
    // After the breaker's cooldown (250 ms) a probe goes through: the object counts again, with
    // the 3 the isolate admitted paid on top of its 1. Without that payment it would admit 2 more.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const after = await worker().dispatch("/burst", { ip });
    expect(after.status).toBe(429);
    expect(after.headers.get("x-ratelimit-remaining")).toBe("0");
  }, 40_000);

  it("answers 503 within the budget on a failMode: closed rule", async () => {
    const ip = "198.51.100.8";
    const key = encodeURIComponent(objectKey(ip, "critical"));
    expect((await timed("/critical", ip)).status).toBe(200);
    expect((await worker().dispatch(`/__silence?key=${key}`)).status).toBe(200);
    const answer = await timed("/critical", ip);
    expect(answer.status).toBe(503);
    expect(answer.ms).toBeLessThan(BUDGET_MS + SLACK_MS);
    await worker().dispatch(`/__speak?key=${key}`);
  }, 30_000);
});
