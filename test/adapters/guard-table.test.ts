/**
 * The guard table: every option on every adapter, through each runtime's real requests. One
 * row per behaviour (skip, cost, the application's user, onRefused, the challenge page, a
 * client-forged origin header, IPv6 clients, a client without an address), one column per
 * adapter (see ./guard-table/drivers.ts). Each adapter only translates; the rows hold them all
 * to the one guard (src/http/guard.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ResolvedPolicy } from "../../src/core/model.js";
import { definePolicy } from "../../src/policy/load.js";
import type { PolicyInput } from "../../src/policy/schema.js";
import { withinOneWindow } from "../support/windows.js";
import { DRIVERS, type Driver, type Running, type Sent } from "./guard-table/drivers.js";
import {
  CHALLENGE_SECRET,
  ORIGIN_HEADER,
  REFUSAL_HEADERS,
  type Setup,
} from "./guard-table/setup.js";

/** The count the origin was given (null: none), from the body every origin in the table writes. */
function originSaw(sent: Sent): string | null {
  expect(sent.status, sent.body).toBe(200);
  return (JSON.parse(sent.body) as { origin: string | null }).origin;
}

const FORGED = { [ORIGIN_HEADER]: "999" };

function policyFor(driver: Driver, input: PolicyInput): ResolvedPolicy {
  if (driver.ip === undefined) return definePolicy(input);
  return definePolicy({ ...input, identity: { ...input.identity, ip: driver.ip } });
}

describe.each(DRIVERS)("the guard on $name", (driver) => {
  beforeAll(() => driver.prepare?.(), 60_000);
  afterAll(() => driver.dispose?.());

  /** Runs `row` against the adapter started with the policy and options, then stops it. */
  async function withAdapter(
    input: PolicyInput,
    setup: Setup,
    row: (adapter: Running) => Promise<void>,
  ): Promise<void> {
    // The rows count a few requests against minute windows on the real clock: a row that
    // straddled a minute's end would see its counts start again (a refusal answered 200).
    await withinOneWindow(60_000, 2_000);
    const adapter = await driver.start(policyFor(driver, input), setup);
    try {
      await row(adapter);
    } finally {
      await adapter.close();
    }
  }

  it("skip: passes a skipped request uncounted, without headers or a client's origin header", async () => {
    await withAdapter(
      { tiers: { anonymous: { global: 2 } } },
      { skip: "/health" },
      async (adapter) => {
        for (let i = 0; i < 3; i++) {
          const health = await adapter.send("/health", { headers: FORGED });
          expect(originSaw(health)).toBeNull();
          expect(health.headers.get("x-ratelimit-limit")).toBeNull();
        }
        expect(originSaw(await adapter.send("/a"))).toBe("1");
        expect(originSaw(await adapter.send("/a"))).toBe("0");
        expect((await adapter.send("/a")).status).toBe(429);
        expect(originSaw(await adapter.send("/health"))).toBeNull();
      },
    );
  });

  it("cost: counts a request as the units the option says", async () => {
    await withAdapter(
      { tiers: { anonymous: { global: 5 } } },
      { cost: { path: "/bulk", units: 3 } },
      async (adapter) => {
        expect(originSaw(await adapter.send("/bulk"))).toBe("2");
        expect(originSaw(await adapter.send("/a"))).toBe("1");
        const bulk = await adapter.send("/bulk");
        expect(bulk.status).toBe(429);
        expect(bulk.headers.get("retry-after")).toMatch(/^\d+$/);
      },
    );
  });

  it("user: counts the application's user when the policy allows it, and only that", async () => {
    await withAdapter(
      {
        identity: { user: { application: true } },
        tiers: { anonymous: { global: 1 }, authenticated: { global: 3 } },
      },
      { sessions: { "s-alice": { id: "alice" } } },
      async (adapter) => {
        const asAlice = { headers: { cookie: "session=s-alice" } };
        expect(originSaw(await adapter.send("/a", asAlice))).toBe("2");
        expect(originSaw(await adapter.send("/a", asAlice))).toBe("1");
        // Naming a user without the application's session is no identity.
        const claims = { headers: { "x-user-id": "alice", cookie: "session=s-nobody" } };
        expect(originSaw(await adapter.send("/a", claims))).toBe("0");
        expect((await adapter.send("/a", claims)).status).toBe(429);
        expect(originSaw(await adapter.send("/a", asAlice))).toBe("0");
      },
    );
  });

  it("user: is refused when the adapter is set up, unless the policy allows it", async () => {
    await expect(
      driver.start(policyFor(driver, { tiers: { anonymous: { global: 1 } } }), {
        sessions: { "s-alice": { id: "alice" } },
      }),
    ).rejects.toThrow(/the user option .* set identity\.user\.application: true/);
  });

  it("onRefused: answers a refusal its own way, with the verdict's headers under its own", async () => {
    await withAdapter(
      { tiers: { anonymous: { global: 1 } } },
      { onRefused: true },
      async (adapter) => {
        expect(originSaw(await adapter.send("/a"))).toBe("0");
        const refused = await adapter.send("/a");
        expect(refused.status).toBe(418);
        expect(refused.body).toBe(`refused anonymous.global ${driver.subjects.ipv4}`);
        // The caller's headers win over the verdict's (its JSON content-type, its retry-after).
        for (const [name, value] of Object.entries(REFUSAL_HEADERS)) {
          expect(refused.headers.get(name), name).toBe(value);
        }
        // The verdict's other headers are there.
        expect(refused.headers.get("x-ratelimit-remaining")).toBe("0");
        expect(refused.headers.get("cache-control")).toBe("no-store");
      },
    );
  });

  it("the challenge route: serves the page under its path, uncounted, to a challenged client", async () => {
    await withAdapter(
      {
        tiers: { anonymous: { global: { limit: 1, action: "challenge", challengeBand: 6 } } },
        challenge: { path: "/captcha", secret: { value: CHALLENGE_SECRET } },
      },
      { challenge: true },
      async (adapter) => {
        expect(originSaw(await adapter.send("/a?x=1"))).toBe("0");
        const challenged = await adapter.send("/a?x=1");
        expect(challenged.status).toBe(302);
        const location = challenged.headers.get("location") as string;
        expect(location).toBe("/captcha?redirect=%2Fa%3Fx%3D1");
        for (let i = 0; i < 3; i++) {
          const page = await adapter.send(location);
          expect(page.status).toBe(200);
          expect(page.headers.get("content-type")).toContain("text/html");
          expect(page.body).toContain("<form");
        }
        // The pages were not counted: the client is still within its band (counts 3 to 5 of 6).
        for (let i = 0; i < 3; i++) expect((await adapter.send("/a")).status).toBe(302);
        expect((await adapter.send("/a")).status).toBe(429);
      },
    );
  });

  it("a forged origin header: the origin reads our count, or nothing, never the client's", async () => {
    await withAdapter({ tiers: { anonymous: { paths: { "/api/": 3 } } } }, {}, async (adapter) => {
      const counted = await adapter.send("/api/a", { headers: FORGED });
      expect(originSaw(counted)).toBe("2");
      expect(counted.headers.get("x-ratelimit-remaining")).toBe("2");
      // No rule counts /home, so there is no count to give: the client's value is dropped all
      // the same.
      expect(originSaw(await adapter.send("/home", { headers: FORGED }))).toBeNull();
      const spelled = { headers: { "X-RateLimit-Remaining": "999" } };
      expect(originSaw(await adapter.send("/api/a", spelled))).toBe("1");
    });
  });

  const routesCase =
    driver.caseSensitiveRouting === undefined
      ? "not known here: every casing counts"
      : driver.caseSensitiveRouting
        ? "exactly"
        : "in any case";
  it(`paths: every spelling of a rule's path counts, letter case as the framework routes it (${routesCase})`, async () => {
    await withAdapter(
      { tiers: { anonymous: { paths: { "/api/export": 3, "/préférences": 2 } } } },
      {},
      async (adapter) => {
        expect(originSaw(await adapter.send("/api/export"))).toBe("2");
        expect(originSaw(await adapter.send("/api/%65xport?x=1"))).toBe("1");
        const recased = await adapter.send("/API/Export");
        if (driver.caseSensitiveRouting === true) {
          // The framework routes /API/Export elsewhere: no rule of this policy counts it.
          expect(originSaw(recased)).toBeNull();
          expect(originSaw(await adapter.send("/api/export"))).toBe("0");
        } else {
          expect(originSaw(recased)).toBe("0");
        }
        expect((await adapter.send("/api/export")).status).toBe(429);
        // A non-ASCII key matches the path as clients escape it, in either case of hex digits.
        expect(originSaw(await adapter.send("/pr%C3%A9f%C3%A9rences"))).toBe("1");
        expect(originSaw(await adapter.send("/pr%c3%a9f%c3%a9rences/x"))).toBe("0");
        const refused = await adapter.send("/pr%C3%A9f%C3%A9rences");
        expect(refused.status).toBe(429);
        expect(refused.headers.get("ratelimit")).toMatch(
          /^"anonymous\.path\.\/pr%C3%A9f%C3%A9rences";r=0;/,
        );
      },
    );
  });

  it("paths: the policy's paths.caseSensitive overrules the framework", async () => {
    await withAdapter(
      { paths: { caseSensitive: false }, tiers: { anonymous: { paths: { "/api/export": 1 } } } },
      {},
      async (adapter) => {
        expect(originSaw(await adapter.send("/API/EXPORT"))).toBe("0");
        expect((await adapter.send("/api/export")).status).toBe(429);
      },
    );
    await withAdapter(
      { paths: { caseSensitive: true }, tiers: { anonymous: { paths: { "/api/export": 1 } } } },
      {},
      async (adapter) => {
        expect(originSaw(await adapter.send("/api/export"))).toBe("0");
        expect(originSaw(await adapter.send("/API/EXPORT"))).toBeNull();
      },
    );
  });

  it("IPv6: counts a client by its /64, apart from IPv4 clients", async () => {
    await withAdapter(
      { tiers: { anonymous: { global: 1 } } },
      { onRefused: true },
      async (adapter) => {
        expect(originSaw(await adapter.send("/a", { from: "ipv6" }))).toBe("0");
        const neighbour = await adapter.send("/a", { from: "ipv6-neighbour" });
        expect(neighbour.status).toBe(418);
        expect(neighbour.body).toBe(`refused anonymous.global ${driver.subjects.ipv6}`);
        expect(originSaw(await adapter.send("/a", { from: "ipv4" }))).toBe("0");
      },
    );
  });

  it.skipIf(driver.alwaysHasAddress !== undefined)(
    `a missing address: counted as the one shared subject ip:unknown${driver.alwaysHasAddress === undefined ? "" : ` (not here: ${driver.alwaysHasAddress})`}`,
    async () => {
      await withAdapter(
        { tiers: { anonymous: { global: 1 } } },
        { onRefused: true },
        async (adapter) => {
          expect(originSaw(await adapter.send("/a", { from: "none" }))).toBe("0");
          const again = await adapter.send("/a", { from: "none" });
          expect(again.status).toBe(418);
          expect(again.body).toBe("refused anonymous.global ip:unknown");
          expect(originSaw(await adapter.send("/a", { from: "ipv4" }))).toBe("0");
        },
      );
    },
  );
});
