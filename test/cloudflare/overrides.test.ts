/**
 * Operators' overrides on Workers, in workerd: two Workers in one Miniflare stand for two
 * isolates (two locations); B binds A's Durable Object class by `scriptName`, so both read the
 * one overrides object `{overrides}`. Overrides are set through A's admin route, with the CLI
 * (`edgelimit override --store cloudflare+http://…`) and with plain HTTP, and each isolate must
 * apply them within its refresh (`refreshMs`, short here) plus a round trip.
 */
import { join } from "node:path";
import { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { bundleWorker } from "../../scripts/build-cloudflare.js";
import { run as overrideCli } from "../../src/cli/override.js";
import { parsePolicy } from "../../src/policy/load.js";
import { HOUR_MS, withinOneWindow } from "../support/windows.js";
import { within } from "../support/within.js";
import { RATELIMITS, scratch } from "./harness.js";

const TOKEN = "test-admin-token-0123456789abcdef";
const REFRESH_MS = 300;
/** The bound a change elsewhere must meet: the refresh, a round trip, and a busy machine's lag. */
const BOUND_MS = 5_000;
const ROUTE = "/__edgelimit/overrides";

// Hour windows for the exact rule: no test waits for a new window, and each uses its own address.
const POLICY = `
version: 1
identity:
  ip: { source: header, header: cf-connecting-ip }
overrides: { maxLimit: 1000 }
namespaces:
  login:
    match: { path: /login, methods: [POST] }
    key: ip
    limit: 5
    window: 60s
    backend: approximate
  api:
    match: { path: /api/ }
    key: ip
    limit: 3
    window: 1h
    backend: exact
`;

let miniflare: Miniflare;
let routeUrl: string;
let cleanup: () => Promise<void> = async () => {};

interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly body: string;
}

async function send(
  worker: "a" | "b" | "c",
  path: string,
  init: RequestInit & { ip?: string } = {},
) {
  const { ip, ...rest } = init;
  const headers = new Headers(rest.headers);
  if (ip !== undefined) headers.set("cf-connecting-ip", ip);
  const fetcher = await miniflare.getWorker(worker);
  const response = await fetcher.fetch(`https://example.test${path}`, {
    ...rest,
    headers,
  } as never);
  return {
    status: response.status,
    headers: response.headers,
    body: await response.text(),
  } as Answer;
}

const api = (worker: "a" | "b" | "c", ip: string) => send(worker, "/api/items", { ip });
const auth = { authorization: `Bearer ${TOKEN}` };

/** A's admin route, as an operator's script would call it. */
function admin(method: string, body?: unknown, token: string | null = TOKEN) {
  return send("a", ROUTE, {
    method,
    headers: token === null ? {} : { authorization: `Bearer ${token}` },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

/** `edgelimit override …` against A's route, in this process; its exit code and output. */
async function cli(args: string[], token = TOKEN): Promise<{ code: number; out: string }> {
  const out: string[] = [];
  const write = (chunk: unknown) => {
    out.push(String(chunk));
    return true;
  };
  const stdout = vi.spyOn(process.stdout, "write").mockImplementation(write);
  const stderr = vi.spyOn(process.stderr, "write").mockImplementation(write);
  const saved = process.env.EDGELIMIT_ADMIN_TOKEN;
  process.env.EDGELIMIT_ADMIN_TOKEN = token;
  try {
    const code = await overrideCli([...args, "--store", routeUrl]);
    return { code, out: out.join("") };
  } finally {
    stdout.mockRestore();
    stderr.mockRestore();
    if (saved === undefined) delete process.env.EDGELIMIT_ADMIN_TOKEN;
    else process.env.EDGELIMIT_ADMIN_TOKEN = saved;
  }
}

async function calls(): Promise<Record<string, number>> {
  return JSON.parse((await send("a", "/__calls")).body);
}

beforeAll(async () => {
  const folder = await scratch();
  cleanup = folder.cleanup;
  const policy = parsePolicy(POLICY);
  const scriptPath = join(folder.dir, "worker.js");
  const plainPath = join(folder.dir, "plain-worker.js");
  await Promise.all([
    bundleWorker("test/cloudflare/fixtures/overrides-worker.ts", scriptPath, {
      define: {
        EDGELIMIT_POLICY: JSON.stringify(policy),
        EDGELIMIT_REFRESH_MS: String(REFRESH_MS),
        EDGELIMIT_DEFAULT_OVERRIDES: "false",
      },
    }),
    // C: the same Worker with the handler's defaults and a policy without `overrides:`.
    bundleWorker("test/cloudflare/fixtures/overrides-worker.ts", plainPath, {
      define: {
        EDGELIMIT_POLICY: JSON.stringify(parsePolicy(POLICY.replace(/^overrides:.*$/m, ""))),
        EDGELIMIT_REFRESH_MS: String(REFRESH_MS),
        EDGELIMIT_DEFAULT_OVERRIDES: "true",
      },
    }),
  ]);
  const common = {
    modules: true,
    scriptPath,
    modulesRoot: folder.dir,
    compatibilityDate: "2025-06-01",
    ratelimits: RATELIMITS,
    bindings: { EDGELIMIT_ADMIN_TOKEN: TOKEN },
  };
  miniflare = new Miniflare({
    durableObjectsPersist: join(folder.dir, "objects"),
    workers: [
      {
        ...common,
        name: "a",
        durableObjects: { EDGELIMIT_COUNTER: { className: "CountingCounter", useSQLite: true } },
      },
      {
        ...common,
        name: "b",
        durableObjects: { EDGELIMIT_COUNTER: { className: "CountingCounter", scriptName: "a" } },
      },
      {
        ...common,
        scriptPath: plainPath,
        name: "c",
        durableObjects: { EDGELIMIT_COUNTER: { className: "CountingCounter", scriptName: "a" } },
      },
    ],
  });
  const url = await miniflare.ready;
  routeUrl = `cloudflare+http://${url.host}${ROUTE}`;
}, 60_000);

afterAll(async () => {
  await miniflare?.dispose();
  await cleanup();
});

describe("overrides on Workers, kept in the Durable Object {overrides}", () => {
  it("a limit set with the CLI through A's route raises the limit on B within the bound; its expiry restores the plan's", async () => {
    const ip = "198.51.100.1";
    // The api rule's hour: the 429s before the raise and after its expiry (5 s on) in one.
    await withinOneWindow(HOUR_MS, 15_000);
    expect((await Promise.all([1, 2, 3].map(() => api("b", ip)))).map((a) => a.status)).toEqual([
      200, 200, 200,
    ]);
    expect((await api("b", ip)).status).toBe(429);

    const set = await cli(["set", `ip:${ip}`, "--rule", "api", "--limit", "6", "--until", "5s"]);
    expect(set, set.out).toMatchObject({ code: 0 });
    expect(set.out).toMatch(/^set ip:198\.51\.100\.1 rule:api limit 6 until /);
    const tookMs = await within(
      async () => (await api("b", ip)).status === 200,
      "raised on B",
      BOUND_MS,
    );
    expect(tookMs).toBeLessThan(BOUND_MS);
    const raised = await api("b", ip);
    expect([raised.status, raised.headers.get("x-ratelimit-limit")]).toEqual([200, "6"]);

    const listed = await cli(["list", "--json"]);
    expect(JSON.parse(listed.out)).toMatchObject([
      { subject: `ip:${ip}`, scope: "rule:api", limit: 6 },
    ]);
    // After `until`, both isolates count to the plan's 3 again, with no refresh needed.
    const until = JSON.parse(listed.out)[0].until as number;
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, until - Date.now()) + 100));
    for (const worker of ["a", "b"] as const) {
      const after = await api(worker, ip);
      expect([after.status, after.headers.get("x-ratelimit-limit")]).toEqual([429, "3"]);
    }
  }, 40_000);

  it("block refuses at once on the Worker that set it and within the bound on the other; remove lifts it", async () => {
    const ip = "198.51.100.2";
    expect((await api("b", ip)).status).toBe(200);
    const set = await admin("POST", { subject: `ip:${ip}`, block: "leaked", note: "ops" });
    expect(set.status, set.body).toBe(200);
    expect((await api("a", ip)).status).toBe(403);
    await within(async () => (await api("b", ip)).status === 403, "blocked on B", BOUND_MS);

    const removed = await cli(["remove", `ip:${ip}`, "--note", "resolved"]);
    expect(removed).toMatchObject({ code: 0, out: "removed\n" });
    // Lifted: counted as before (the requests B admitted before it heard of the block count).
    await within(async () => (await api("b", ip)).status !== 403, "lifted on B", BOUND_MS);
    const listed = JSON.parse((await send("a", `${ROUTE}?log=1000`, { headers: auth })).body);
    expect(listed.overrides.some((o: { subject: string }) => o.subject === `ip:${ip}`)).toBe(false);
    // The object's change log has both, with their notes.
    const mine = listed.changes.filter((c: { subject: string }) => c.subject === `ip:${ip}`);
    expect(mine.map((c: { action: string; note?: string }) => [c.action, c.note])).toEqual([
      ["set", "ops"],
      ["remove", "resolved"],
    ]);
  });

  it("a limit override on a binding rule is counted exactly in a Durable Object, at the override's limit", async () => {
    // The binding holds 5 a minute for every address; an override of 0 refuses at once.
    const ip = "198.51.100.3";
    expect((await send("a", "/login", { method: "POST", ip })).status).toBe(200);
    const set = await admin("POST", { subject: `ip:${ip}`, rule: "login", limit: 0 });
    expect(set.status, set.body).toBe(200);
    expect((await send("a", "/login", { method: "POST", ip })).status).toBe(429);
    // Another address is still the binding's.
    expect((await send("a", "/login", { method: "POST", ip: "198.51.100.4" })).status).toBe(200);
  });

  it("a missing or wrong token is refused with 401 and stores nothing; bad input is refused with its code", async () => {
    const ip = "198.51.100.5";
    const subject = `ip:${ip}`;
    expect((await admin("POST", { subject, block: true }, null)).status).toBe(401);
    const wrong = await admin("POST", { subject, block: true }, `${TOKEN}x`);
    expect([wrong.status, JSON.parse(wrong.body).error]).toEqual([401, "EL_OVERRIDE_ADMIN"]);
    const byCli = await cli(["set", subject, "--block"], "not-the-token-at-all");
    expect(byCli.code).toBe(1);
    expect(byCli.out).toContain("EL_OVERRIDE_ADMIN");
    const noToken = await cli(["list"], "");
    expect([noToken.code, noToken.out]).toEqual([
      1,
      expect.stringContaining("EDGELIMIT_ADMIN_TOKEN"),
    ]);

    const bad: [unknown, string][] = [
      [{ subject, rule: "nope", limit: 10 }, "EL_OVERRIDE_RULE"],
      [{ subject, limit: 5000 }, "EL_OVERRIDE_LIMIT"],
      [{ subject, limit: 10, until: Date.now() - 1000 }, "EL_OVERRIDE_EXPIRY"],
      [{ subject: "host:example.com", limit: 10 }, "EL_OVERRIDE_SUBJECT"],
    ];
    for (const [body, code] of bad) {
      const refused = await admin("POST", body);
      expect([refused.status, JSON.parse(refused.body).error]).toEqual([400, code]);
    }
    const listed = JSON.parse((await admin("GET", undefined)).body).overrides;
    expect(listed.filter((o: { subject: string }) => o.subject === subject)).toEqual([]);
    expect((await api("b", ip)).status).toBe(200);
  });

  it("an overrides object that stops answering delays no request; the isolates keep their copy", async () => {
    const ip = "198.51.100.6";
    const set = await admin("POST", { subject: `ip:${ip}`, block: true });
    expect(set.status, set.body).toBe(200);
    await within(async () => (await api("b", ip)).status === 403, "blocked on B", BOUND_MS);
    expect((await send("a", "/__silence")).status).toBe(200);
    try {
      // Several refreshes' worth of requests: each begins or finds a read that never answers.
      const started = Date.now();
      while (Date.now() - started < 4 * REFRESH_MS) {
        for (const worker of ["a", "b"] as const) {
          const at = Date.now();
          const blocked = await api(worker, ip);
          // A request that waited for the read would take its 3 s timeout.
          expect([blocked.status, Date.now() - at < 1_500]).toEqual([403, true]);
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    } finally {
      await send("a", "/__speak");
    }
  });

  it("requests read nothing of the overrides object: about one small read per refresh per isolate", async () => {
    const before = await calls();
    const started = Date.now();
    let requests = 0;
    for (let round = 0; round < 3; round++) {
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          api(i % 2 === 0 ? "a" : "b", `203.0.113.${round * 20 + i}`),
        ),
      );
      requests += answers.length;
      expect(answers.every((answer) => answer.status === 200)).toBe(true);
    }
    const elapsed = Date.now() - started;
    const after = await calls();
    const reads = (after["/overrides/read"] ?? 0) - (before["/overrides/read"] ?? 0);
    const lists = (after["/overrides/read+list"] ?? 0) - (before["/overrides/read+list"] ?? 0);
    // Two isolates, each at most one read per refresh begun (and one in flight at the start).
    expect(reads + lists).toBeLessThanOrEqual(2 * (Math.floor(elapsed / REFRESH_MS) + 2));
    expect(reads + lists).toBeLessThan(requests / 2);
    // Nothing changed meanwhile: a read carried the list at most once per isolate (for the
    // changes of the tests before, which B had not read yet).
    expect(lists).toBeLessThanOrEqual(2);
  });

  it("a Worker whose policy has no overrides: section reads none by default (no read, no override applied)", async () => {
    const ip = "198.51.100.77";
    expect((await admin("POST", { subject: `ip:${ip}`, limit: 10 })).status).toBe(200);
    // A read begun beside an earlier test's last request has landed by now.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const before = await calls();
    const answers = [];
    for (let i = 0; i < 5; i++) answers.push(await api("c", ip));
    const after = await calls();
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200, 429, 429]);
    expect(after["/overrides/read"] ?? 0).toBe(before["/overrides/read"] ?? 0);
    expect(after["/overrides/read+list"] ?? 0).toBe(before["/overrides/read+list"] ?? 0);
    expect((await admin("DELETE", { subject: `ip:${ip}` })).status).toBe(200);
  });
});
