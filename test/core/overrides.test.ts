/**
 * Overrides on the memory store: what each effect does to `check` and `peek`, how expiry
 * restores the plan's limit, how two limiters on one store see each other's changes (within
 * the refresh, at once on the one that set it), and every bad input refused with nothing stored.
 */
import { afterEach, describe, expect, it } from "vitest";
import { EdgelimitError } from "../../src/core/errors.js";
import type { RequestDescription } from "../../src/core/types.js";
import { createLimiter, type Limiter } from "../../src/limiter.js";
import { definePolicy } from "../../src/policy/load.js";
import type { PolicyInput } from "../../src/policy/schema.js";
import { MemoryStore } from "../../src/stores/memory.js";

const T0 = Date.UTC(2026, 10, 30, 12, 0, 10);
const POLICY: PolicyInput = {
  identity: { user: { trustedHeader: { user: "x-user", from: "any" } } },
  tiers: {
    anonymous: { global: { limit: 3, window: "60s" } },
    authenticated: { global: { limit: 3, window: "60s" } },
  },
  overrides: { maxLimit: 100 },
};
const user = { ip: "203.0.113.7", path: "/api/x", headers: { "x-user": "u_abc" } };
const anonymous = { ip: "203.0.113.7", path: "/api/x" };

const open: Limiter[] = [];
afterEach(() => {
  for (const limiter of open.splice(0)) limiter.close();
});

function setup(store = new MemoryStore(), refreshMs = 5_000, input: PolicyInput = POLICY) {
  let clock = T0;
  const limiter = createLimiter({
    policy: definePolicy(input),
    store,
    clock: () => clock,
    onStoreError: false,
    overrides: { refreshMs },
  });
  open.push(limiter);
  return { limiter, store, advance: (ms: number) => (clock += ms) };
}

async function admitted(limiter: Limiter, request: RequestDescription, n: number): Promise<number> {
  let count = 0;
  for (let i = 0; i < n; i++) if ((await limiter.check(request)).action === "allow") count++;
  return count;
}

const ruleOf = (limiter: Limiter) => (limiter.policy.rules[1] ?? limiter.policy.rules[0])?.id ?? "";

describe("overrides on the memory store", () => {
  it("a limit override raises one user's limit at once on the instance that set it, headers and peek included", async () => {
    const { limiter } = setup();
    expect(await admitted(limiter, user, 5)).toBe(3);
    await limiter.overrides.set({ subject: "user:u_abc", limit: 10, note: "contract #42" });
    // The count carries over: 5 counted (3 admitted), so 5 more are admitted, not 10.
    const verdict = await limiter.check(user);
    expect(verdict.action).toBe("allow");
    expect(verdict.headers["x-ratelimit-limit"]).toBe("10");
    const peek = await limiter.peek(user);
    expect(peek.rules.map((rule) => rule.limit)).toEqual([10]);
    expect(await admitted(limiter, user, 10)).toBe(4);
    // Another subject keeps the plan's limit.
    expect(await admitted(limiter, anonymous, 5)).toBe(3);
  });

  it("block refuses with 403 and reason override-block without counting; allow admits without counting", async () => {
    const { limiter } = setup();
    await limiter.overrides.set({ subject: "user:u_abc", block: "leaked key" });
    const refused = await limiter.check(user);
    expect(refused.status).toBe(403);
    expect(refused.reason).toBe("override-block");
    expect((await limiter.peek(user)).reason).toBe("override-block");
    await limiter.overrides.set({ subject: "user:u_abc", allow: true });
    expect(await admitted(limiter, user, 20)).toBe(20);
    expect((await limiter.check(user)).reason).toBe("override-allow");
    await limiter.overrides.remove({ subject: "user:u_abc" });
    // Nothing was counted while allowed or blocked.
    expect(await admitted(limiter, user, 5)).toBe(3);
  });

  it("an address range override applies to every address inside it, IPv6 prefixes included", async () => {
    const { limiter } = setup();
    await limiter.overrides.set({ subject: "ip:203.0.113.0/24", block: true });
    await limiter.overrides.set({ subject: "ip:2001:db8::/32", limit: 50 });
    expect((await limiter.check({ ip: "203.0.113.99", path: "/" })).reason).toBe("override-block");
    expect((await limiter.check({ ip: "198.51.100.1", path: "/" })).action).toBe("allow");
    const v6 = { ip: "2001:db8:1:2::7", path: "/" };
    expect((await limiter.check(v6)).headers["x-ratelimit-limit"]).toBe("50");
  });

  it("expiry restores the plan's limit without a refresh", async () => {
    const { limiter, advance } = setup();
    await limiter.overrides.set({ subject: "user:u_abc", limit: 10, until: T0 + 1_000 });
    expect((await limiter.peek(user)).rules[0]?.limit).toBe(10);
    advance(1_000);
    expect((await limiter.peek(user)).rules[0]?.limit).toBe(3);
    expect(await limiter.overrides.list()).toEqual([]);
  });

  it("another limiter on the same store applies a change within its refresh", async () => {
    const store = new MemoryStore();
    const { limiter: setter } = setup(store, 50);
    const { limiter: other } = setup(store, 50);
    await setter.overrides.set({ subject: "user:u_abc", block: true });
    const deadline = Date.now() + 5_000;
    while ((await other.check(user)).reason !== "override-block") {
      expect(Date.now()).toBeLessThan(deadline);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const [change] = await other.overrides.changes();
    expect(change).toMatchObject({ action: "set", subject: "user:u_abc", scope: "all" });
  });

  it("the policy's overrides.refresh sets how often a limiter reads them (its propagation bound); under 100ms it is refused", async () => {
    const store = new MemoryStore();
    const policy = definePolicy({ ...POLICY, overrides: { maxLimit: 100, refresh: "150ms" } });
    expect(policy.overrides?.refreshMs).toBe(150);
    const setter = createLimiter({ policy, store, overrides: { refreshMs: 600_000 } });
    const other = createLimiter({ policy, store, onStoreError: false });
    open.push(setter, other);
    await other.check(user); // its first read has been made
    await setter.overrides.set({ subject: "user:u_abc", block: true });
    const started = Date.now();
    while ((await other.check(user)).reason !== "override-block") {
      // The default refresh (5 s) would take far longer than this.
      expect(Date.now() - started).toBeLessThan(2_000);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(() => definePolicy({ ...POLICY, overrides: { refresh: "50ms" } })).toThrow(
      /overrides\.refresh.*100ms or more/s,
    );
  });

  it("a rule override applies to that rule only; a plan override to that plan's rules", async () => {
    const { limiter } = setup();
    const rule = ruleOf(limiter);
    await limiter.overrides.set({ subject: "user:u_abc", rule, limit: 7 });
    expect((await limiter.peek(user)).rules[0]?.limit).toBe(7);
    expect((await limiter.overrides.list()).map((o) => o.scope)).toEqual([`rule:${rule}`]);
  });
});

describe("bad overrides are refused and nothing is stored", () => {
  const cases: [string, Record<string, unknown>, string][] = [
    ["an unknown rule", { subject: "user:u_abc", rule: "nope", limit: 5 }, "EL_OVERRIDE_RULE"],
    ["a limit above the bound", { subject: "user:u_abc", limit: 101 }, "EL_OVERRIDE_LIMIT"],
    ["a negative limit", { subject: "user:u_abc", limit: -1 }, "EL_OVERRIDE_LIMIT"],
    [
      "an expiry in the past",
      { subject: "user:u_abc", limit: 5, until: T0 - 1 },
      "EL_OVERRIDE_EXPIRY",
    ],
    [
      "an expiry that is no time",
      { subject: "user:u_abc", limit: 5, until: "soon" },
      "EL_OVERRIDE_EXPIRY",
    ],
    ["a subject with no kind", { subject: "u_abc", limit: 5 }, "EL_OVERRIDE_SUBJECT"],
    ["an address that is none", { subject: "ip:300.1.2.3", block: true }, "EL_OVERRIDE_SUBJECT"],
    ["no effect", { subject: "user:u_abc" }, "EL_OVERRIDE_INVALID"],
    ["two effects", { subject: "user:u_abc", limit: 5, allow: true }, "EL_OVERRIDE_INVALID"],
  ];
  for (const [name, input, code] of cases) {
    it(`${name}: ${code}`, async () => {
      const { limiter } = setup();
      const error = await limiter.overrides.set(input as never).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(EdgelimitError);
      expect((error as EdgelimitError).code).toBe(code);
      expect(await limiter.overrides.list()).toEqual([]);
      expect(await limiter.overrides.changes()).toEqual([]);
    });
  }

  it("a rule the policy's overrides.rules leaves out: EL_OVERRIDE_RULE", async () => {
    const { limiter } = setup(new MemoryStore(), 5_000, {
      ...POLICY,
      overrides: { rules: ["anonymous.global"] },
    });
    const error = await limiter.overrides
      .set({ subject: "user:u_abc", rule: "authenticated.global", limit: 5 })
      .catch((e: unknown) => e);
    expect((error as EdgelimitError).code).toBe("EL_OVERRIDE_RULE");
    expect(await limiter.overrides.list()).toEqual([]);
  });

  it("a store full of unexpired overrides refuses another: EL_OVERRIDE_FULL", async () => {
    const store = new MemoryStore();
    const source = store.overrides();
    for (let i = 0; i < 3; i++) {
      await source.put({ subject: `user:u${i}`, scope: "all", effect: "allow", setAt: T0 }, T0, 3);
    }
    const error = await source
      .put({ subject: "user:x", scope: "all", effect: "allow", setAt: T0 }, T0, 3)
      .catch((e: unknown) => e);
    expect((error as EdgelimitError).code).toBe("EL_OVERRIDE_FULL");
    expect((await source.list()).length).toBe(3);
  });
});
