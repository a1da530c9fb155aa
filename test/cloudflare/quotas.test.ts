import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { counterKey, subjectKey } from "../../src/core/keys.js";
import { LATE_GRACE_MS } from "../../src/core/windows.js";
import { parsePolicy } from "../../src/policy/load.js";
import {
  buildWorker,
  type Runtime,
  scratch,
  startRuntime,
  tally,
  tokenFor,
  withinOneWindow,
} from "./harness.js";

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
      - name: enterprise-monthly
        key: user
        plans: [enterprise]
        limit: 1000
        window: 1mo
        backend: exact
  burst:
    match: { path: /burst }
    key: ip
    limit: 3
    window: 2s
    backend: exact
`;

function nextMonthStartSeconds(now: number): number {
  const date = new Date(now);
  return Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 1) / 1000;
}

describe("exact quotas on the Durable Object, in workerd", () => {
  let runtime: Runtime;
  let script = "";
  let objects = "";
  let cleanup: () => Promise<void> = async () => {};

  beforeAll(async () => {
    const folder = await scratch();
    cleanup = folder.cleanup;
    objects = join(folder.dir, "objects");
    script = await buildWorker(
      folder.dir,
      parsePolicy(POLICY, "quotas.yaml"),
      "test/cloudflare/fixtures/inspectable-worker.ts",
    );
    runtime = await startRuntime(script, objects, "InspectableCounter");
    // The "rate" rule is on the rate-limit binding, whose periods are 10 or 60 s: a minute. The
    // two tests that count on it take about 2 s with the restart (on a loaded machine too); 12 s
    // leaves room.
    await withinOneWindow(60_000, 12_000);
  }, 60_000);

  afterAll(async () => {
    await runtime?.miniflare.dispose();
    await cleanup();
  });

  const asUser = (token: string, path = "/api/data") =>
    runtime.dispatch(path, { ip: "203.0.113.80", headers: { authorization: `Bearer ${token}` } });

  it("holds a monthly quota to exactly its limit under 100 concurrent requests", async () => {
    const token = await tokenFor("u_monthly", "pro");
    const responses = await Promise.all(Array.from({ length: 100 }, () => asUser(token)));
    expect(tally(responses.map((response) => response.status))).toEqual({ 200: 30, 429: 70 });
    const passed = responses.filter((response) => response.status === 200);
    expect(
      passed
        .map((response) => Number(response.headers.get("x-ratelimit-remaining")))
        .sort((a, b) => a - b),
    ).toEqual(Array.from({ length: 30 }, (_, i) => i));
    // The window is the calendar month (UTC): it resets at the start of the next one.
    expect(Number(passed[0]?.headers.get("x-ratelimit-reset"))).toBe(
      nextMonthStartSeconds(Date.now()),
    );
  });

  it("keeps exact counts across a runtime restart; requests the binding refused never reached them", async () => {
    const pro = await tokenFor("u_persist", "pro");
    for (let i = 0; i < 10; i++) expect((await asUser(pro)).status).toBe(200);

    // 105 requests: the binding (100 per 60 s) admits 100 and refuses 5 before the object.
    const enterprise = await tokenFor("u_enterprise", "enterprise");
    const statuses: number[] = [];
    for (let i = 0; i < 105; i++) statuses.push((await asUser(enterprise)).status);
    expect(tally(statuses)).toEqual({ 200: 100, 429: 5 });

    await runtime.miniflare.dispose();
    runtime = await startRuntime(script, objects, "InspectableCounter");

    const proAfter = await asUser(pro);
    expect(proAfter.status).toBe(200);
    expect(proAfter.headers.get("x-ratelimit-remaining")).toBe("19");
    // The binding's count is not persisted (per location, approximate); the object's is.
    const enterpriseAfter = await asUser(enterprise);
    expect(enterpriseAfter.status).toBe(200);
    expect(enterpriseAfter.headers.get("x-ratelimit-remaining")).toBe(String(1000 - 101));
  }, 30_000);

  it("deletes an object's state with an alarm once its window (and the late grace) is over", async () => {
    const ip = "198.51.100.90";
    const key = counterKey(subjectKey("ip", ip), "burst", "burst");
    const inspect = async () =>
      JSON.parse((await runtime.dispatch(`/__inspect?key=${encodeURIComponent(key)}`)).body) as {
        keys: string[];
        alarm: number | null;
      };
    await withinOneWindow(2_000, 1_500);
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push((await runtime.dispatch("/burst", { ip })).status);
    expect(statuses).toEqual([200, 200, 200, 429]);
    const during = await inspect();
    expect(during.keys).toEqual([key]);
    // The window's end, and the grace a request counted late still finds its count in.
    expect(during.alarm).toBe(Math.ceil(Date.now() / 2_000) * 2_000 + LATE_GRACE_MS);

    await new Promise((resolve) => setTimeout(resolve, (during.alarm ?? 0) - Date.now() + 800));
    expect(await inspect()).toMatchObject({ keys: [], alarm: null });
    expect((await runtime.dispatch("/burst", { ip })).status).toBe(200);
  }, 20_000);
});
