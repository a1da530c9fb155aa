/**
 * The findings of "Exact under time", each as the case that reproduced it: a request counted
 * a few milliseconds late, a reload, a reset, a bad cost or user id must never let a subject
 * through at more than its limit (or shut it out for nothing).
 */
import { describe, expect, it } from "vitest";
import { EdgelimitError } from "../../src/core/errors.js";
import { hybridCounting } from "../../src/core/hybrid-counting.js";
import { NOT_CACHED, type TokenVerifier, type VerifiedUser } from "../../src/core/identify.js";
import type { CounterSpec, CounterState, Store } from "../../src/core/types.js";
import { createLimiter } from "../../src/limiter.js";
import type { WindowDuration } from "../../src/policy/input-types.js";
import { definePolicy } from "../../src/policy/load.js";
import { MemoryStore, memoryStore } from "../../src/stores/memory.js";

const MINUTE = 60_000;
/** The start of a minute. */
const T0 = Date.UTC(2026, 10, 30, 12, 0, 0);

function counter(limit: number, extra: Partial<CounterSpec> = {}): CounterSpec {
  return {
    key: "ip:1|a|global",
    subject: "ip:1",
    algorithm: "fixed-window",
    limit,
    window: { ms: MINUTE },
    cost: 1,
    mode: "enforce",
    ruleId: "anonymous.global",
    namespace: "a",
    ...extra,
  };
}

/** A token check that waits for the test to let it finish, as a slow JWKS fetch would. */
class SlowTokens implements TokenVerifier {
  readonly waiting: (() => void)[] = [];

  token(request: { headers?: unknown }): string | undefined {
    const headers = request.headers as Record<string, string> | undefined;
    return headers?.authorization;
  }

  cached(token: string): VerifiedUser | undefined | typeof NOT_CACHED {
    return token === "slow" ? NOT_CACHED : { id: "u1", plan: undefined };
  }

  verify(): Promise<VerifiedUser | undefined> {
    return new Promise((resolve) =>
      this.waiting.push(() => resolve({ id: "u1", plan: undefined })),
    );
  }
}

/** A remote store in front of a memory store: the engine puts hybrid counting in front of it. */
class RemoteMemory implements Store {
  readonly name = "remote-memory";
  readonly memory = new MemoryStore();
  calls = 0;

  async apply(counters: readonly CounterSpec[], now: number): Promise<CounterState[]> {
    this.calls++;
    await new Promise((resolve) => setImmediate(resolve));
    return this.memory.applySync(counters, now);
  }

  async reset(counters: readonly CounterSpec[]): Promise<void> {
    await this.memory.reset(counters);
  }
}

describe("a late request never rewinds a newer window", () => {
  for (const algorithm of ["fixed-window", "sliding-window"] as const) {
    it(`memory store, ${algorithm}: limit 10, a request from the minute before arrives after ten of the next`, () => {
      const store = memoryStore();
      const spec = counter(10, { algorithm });
      let admitted = 0;
      const apply = (now: number) => {
        if (store.applySync([spec], now)[0]?.allowed) admitted++;
      };
      for (let i = 0; i < 10; i++) apply(T0 + MINUTE + 100 + i);
      apply(T0 + MINUTE - 5); // counted late: it started in the minute before
      for (let i = 0; i < 10; i++) apply(T0 + MINUTE + 200 + i);
      expect(admitted).toBe(10);
      // The newer window's count was not lost.
      expect(store.applySync([{ ...spec, cost: 0 }], T0 + MINUTE + 300)[0]?.count).toBe(21);
    });
  }

  it("the engine: a token check of 20 ms that straddles the minute does not open the next minute twice", async () => {
    const clock = { now: T0 + MINUTE - 10 };
    const tokens = new SlowTokens();
    const limiter = createLimiter({
      policy: definePolicy({
        identity: { user: { application: true } },
        tiers: {
          anonymous: { global: 10 },
          authenticated: { global: 10 },
        },
      }),
      store: memoryStore(),
      clock: () => clock.now,
      tokens: () => tokens,
    });
    const late = limiter.check({
      ip: "203.0.113.1",
      path: "/",
      headers: { authorization: "slow" },
    });
    clock.now = T0 + MINUTE + 10;
    const request = { ip: "203.0.113.1", path: "/", headers: { authorization: "fast" } };
    const first = await Promise.all(Array.from({ length: 10 }, () => limiter.check(request)));
    for (const finish of tokens.waiting) finish();
    const lateVerdict = await late;
    const second = await Promise.all(Array.from({ length: 10 }, () => limiter.check(request)));
    const admitted = [...first, lateVerdict, ...second].filter((v) => v.action === "allow");
    expect(first.every((v) => v.action === "allow")).toBe(true);
    expect(admitted).toHaveLength(10);
  });

  it("hybrid counting: a late request keeps the newer reservation (no units lost, no extra calls)", async () => {
    const store = new RemoteMemory();
    const clock = { now: T0 };
    const limiter = createLimiter({
      policy: definePolicy({
        tiers: { anonymous: { global: { limit: 100, window: "60s", counting: "hybrid" } } },
      }),
      store: hybridCounting(store, { clock: () => clock.now }),
      clock: () => clock.now,
      onStoreError: () => {},
    });
    let admitted = 0;
    const check = async (now: number) => {
      clock.now = now;
      if ((await limiter.check({ ip: "203.0.113.2", path: "/" })).action === "allow") admitted++;
    };
    // A busy subject in the minute before, so that it reserves ahead in the next one.
    for (let i = 0; i < 40; i++) await check(T0 + 20_000 + i * 1000);
    admitted = 0;
    const callsBefore = store.calls;
    // In the next minute, every tenth request is one that started 3 ms before it.
    for (let i = 0; i < 150; i++) {
      const now = T0 + MINUTE + i * 100;
      await check(i % 10 === 5 && i < 100 ? T0 + MINUTE - 3 : now);
    }
    expect(admitted).toBe(100);
    expect(store.calls - callsBefore).toBeLessThan(60);
  });
});

describe("hybrid reservations belong to one window of one rule", () => {
  it("a reload from 1h to 10s windows spends no unit reserved under the hour", async () => {
    const store = new RemoteMemory();
    const clock = { now: T0 + 1000 };
    const hourly = definePolicy({
      tiers: { anonymous: { global: { limit: 1000, window: "1h", counting: "hybrid" } } },
    });
    const tenSeconds = definePolicy({
      tiers: { anonymous: { global: { limit: 1000, window: "10s", counting: "hybrid" } } },
    });
    const limiter = createLimiter({
      policy: hourly,
      store: hybridCounting(store, { clock: () => clock.now }),
      clock: () => clock.now,
      onStoreError: () => {},
    });
    const request = { ip: "203.0.113.3", path: "/" };
    // Busy under the hourly rule: it holds units reserved for the rest of the hour.
    for (let i = 0; i < 300; i++) {
      clock.now = T0 + 1000 + i * 10;
      await limiter.check(request);
    }
    limiter.reload(tenSeconds);
    const perWindow = new Map<number, number>();
    // 200 requests/s from the reload on, through the rest of this 10-s window and three more.
    for (let i = 0; i < 7200; i++) {
      clock.now = T0 + 4000 + i * 5;
      const verdict = await limiter.check(request);
      if (verdict.action !== "allow") continue;
      const window = Math.floor(clock.now / 10_000);
      perWindow.set(window, (perWindow.get(window) ?? 0) + 1);
    }
    expect([...perWindow.values()]).toEqual([1000, 1000, 1000, 1000]);
  });

  it("a reload that changes a rule's window drops the blocks cached under the old one", async () => {
    const store = new RemoteMemory();
    const clock = { now: T0 + 1000 };
    const rule = (window: WindowDuration) =>
      definePolicy({ tiers: { anonymous: { global: { limit: 10, window } } } });
    const limiter = createLimiter({
      policy: rule("1h"),
      store,
      clock: () => clock.now,
      onStoreError: () => {},
    });
    const request = { ip: "203.0.113.3", path: "/" };
    for (let i = 0; i < 11; i++) await limiter.check(request);
    expect((await limiter.check(request)).action).toBe("block");
    limiter.reload(rule("10s"));
    clock.now = T0 + 10_000;
    expect((await limiter.check(request)).action).toBe("allow");
  });
});

describe("a reset clears every reservation of the subject", () => {
  it("including the challenge band's: a pass holder gets no more than the band after a reset", async () => {
    const store = new RemoteMemory();
    const clock = { now: T0 + 1000 };
    const limiter = createLimiter({
      policy: definePolicy({
        tiers: {
          anonymous: {
            global: {
              limit: 100,
              window: "60s",
              action: "challenge",
              challengeBand: 2,
              counting: "hybrid",
            },
          },
        },
      }),
      store: hybridCounting(store, { leaseMs: 50, clock: () => clock.now }),
      clock: () => clock.now,
      onStoreError: () => {},
    });
    const holder = { ip: "203.0.113.4", path: "/", passVerified: true };
    let admitted = 0;
    for (let i = 0; i < 150; i++) {
      clock.now = T0 + 1000 + i * 20;
      if ((await limiter.check(holder)).action === "allow") admitted++;
    }
    await limiter.reset(holder);
    admitted = 0;
    for (let i = 0; i < 400; i++) {
      clock.now = T0 + 5000 + i * 20;
      if ((await limiter.check(holder)).action === "allow") admitted++;
    }
    expect(admitted).toBe(200);
  });

  it("in every process: units held elsewhere before the reset are not spent after it", async () => {
    const store = new RemoteMemory();
    const clock = { now: T0 + 1000 };
    const policy = definePolicy({
      tiers: { anonymous: { global: { limit: 100, window: "60s", counting: "hybrid" } } },
    });
    const limiters = [0, 1].map(() =>
      createLimiter({
        policy,
        store: hybridCounting(store, { leaseMs: 50, clock: () => clock.now }),
        clock: () => clock.now,
        onStoreError: () => {},
      }),
    );
    const request = { ip: "203.0.113.5", path: "/" };
    // Both processes busy: each holds units reserved ahead.
    for (let i = 0; i < 40; i++) {
      clock.now = T0 + 1000 + i * 100;
      await Promise.all(limiters.map((limiter) => limiter.check(request)));
    }
    await limiters[0]?.reset(request);
    let admitted = 0;
    for (let i = 0; i < 200; i++) {
      clock.now = T0 + 6000 + i * 50;
      const verdicts = await Promise.all(limiters.map((limiter) => limiter.check(request)));
      admitted += verdicts.filter((v) => v.action === "allow").length;
    }
    expect(admitted).toBeLessThanOrEqual(100);
    expect(admitted).toBeGreaterThan(80);
  });
});

describe("the engine validates costs and user ids, whatever the entry point", () => {
  const policy = definePolicy({
    identity: { user: { application: true } },
    tiers: { anonymous: { global: 5 }, authenticated: { global: 5 } },
  });

  for (const cost of [-3, 0, Number.NaN, 1e300, 1.5, Number.POSITIVE_INFINITY]) {
    it(`refuses a cost of ${cost} with EL_BAD_COST, in limiter.check`, async () => {
      const store = memoryStore();
      const limiter = createLimiter({ policy, store });
      const checked = limiter.check({ ip: "203.0.113.6", path: "/", cost });
      await expect(checked).rejects.toBeInstanceOf(EdgelimitError);
      await expect(checked).rejects.toMatchObject({ code: "EL_BAD_COST" });
      // Nothing was counted.
      expect(store.size).toBe(0);
    });
  }

  it("a cost of 2 counts two units", async () => {
    const limiter = createLimiter({ policy, store: memoryStore() });
    const verdict = await limiter.check({ ip: "203.0.113.6", path: "/", cost: 2 });
    expect(verdict.remaining).toBe(3);
  });

  for (const id of [undefined, null, ""]) {
    it(`an application user with id ${JSON.stringify(id)} is anonymous, counted by address`, async () => {
      const limiter = createLimiter({ policy, store: memoryStore() });
      const user = { id } as unknown as { id: string };
      const first = await limiter.check({ ip: "203.0.113.7", path: "/", user });
      const second = await limiter.check({ ip: "203.0.113.8", path: "/", user });
      expect(first.tier).toBe("anonymous");
      expect(first.subject).toBe("ip:203.0.113.7");
      expect(second.subject).toBe("ip:203.0.113.8");
    });
  }

  it("an application user id that is not a string is an error that says what to pass", async () => {
    const limiter = createLimiter({ policy, store: memoryStore() });
    const user = { id: 42 } as unknown as { id: string };
    await expect(limiter.check({ ip: "203.0.113.9", path: "/", user })).rejects.toMatchObject({
      code: "EL_BAD_USER",
    });
  });
});
