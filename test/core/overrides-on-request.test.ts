/**
 * Overrides refreshed by requests (`overrides.onRequest`), for runtimes that run nothing
 * between requests (Lambda@Edge, Workers): no timer reads the store; a request that finds the
 * snapshot `refreshMs` old starts a read beside itself and is decided on what was held; a new
 * instance's first requests wait for its first read, at most `firstWaitMs`.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createLimiter, type Limiter } from "../../src/limiter.js";
import { definePolicy } from "../../src/policy/load.js";
import { MemoryStore } from "../../src/stores/memory.js";
import { WatchedStore } from "../support/watched-store.js";

const T0 = Date.UTC(2026, 11, 2, 12, 0, 10);
const POLICY = definePolicy({
  identity: { user: { trustedHeader: { user: "x-user", from: "any" } } },
  tiers: {
    anonymous: { global: { limit: 3, window: "1h" } },
    authenticated: { global: { limit: 3, window: "1h" } },
  },
});
const user = { ip: "203.0.113.7", path: "/api/x", headers: { "x-user": "u_abc" } };

const open: Limiter[] = [];
afterEach(() => {
  for (const limiter of open.splice(0)) limiter.close();
});

function onRequest(store: WatchedStore, firstWaitMs = 1_000) {
  let clock = T0;
  const limiter = createLimiter({
    policy: POLICY,
    store,
    clock: () => clock,
    onStoreError: false,
    overrides: { refreshMs: 5_000, onRequest: { firstWaitMs } },
  });
  open.push(limiter);
  return { limiter, advance: (ms: number) => (clock += ms) };
}

/** An operator on another instance (no reads of its own). */
function operator(store: MemoryStore): Limiter {
  const limiter = createLimiter({ policy: POLICY, store, overrides: { refreshMs: 600_000 } });
  open.push(limiter);
  return limiter;
}

const limitOf = async (limiter: Limiter) =>
  (await limiter.check(user)).headers["x-ratelimit-limit"];

describe("overrides refreshed on requests", () => {
  it("a new instance's first request waits for the first read and applies what it found", async () => {
    const store = new WatchedStore();
    await operator(store).overrides.set({ subject: "user:u_abc", limit: 50 });
    const { limiter } = onRequest(store);
    expect(await limitOf(limiter)).toBe("50");
  });

  it("reads nothing without requests, and a request after refreshMs is decided on the snapshot held while it reads the new one", async () => {
    const store = new WatchedStore();
    const admin = operator(store);
    const { limiter, advance } = onRequest(store);
    expect(await limitOf(limiter)).toBe("3");
    const afterFirst = store.versionReads;
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(store.versionReads).toBe(afterFirst);

    await admin.overrides.set({ subject: "user:u_abc", limit: 50 });
    advance(4_999);
    expect(await limitOf(limiter)).toBe("3");
    expect(store.versionReads).toBe(afterFirst);
    advance(1);
    // This request starts the read and is decided on the old snapshot; the next applies it.
    expect(await limitOf(limiter)).toBe("3");
    expect(store.versionReads).toBe(afterFirst + 1);
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(await limitOf(limiter)).toBe("50");
    expect(store.versionReads).toBe(afterFirst + 1);
  });

  it("starts one read at a time, and hands the read in flight to a request's waitUntil (keepAlive)", async () => {
    const store = new WatchedStore();
    const { limiter, advance } = onRequest(store, 1_000);
    await limiter.check(user);
    expect(store.versionReads).toBe(1);
    let release = () => {};
    store.hold = new Promise<void>((resolve) => {
      release = resolve;
    });
    advance(5_000);
    await Promise.all([limiter.check(user), limiter.check(user), limiter.check(user)]);
    expect(store.versionReads).toBe(2);
    const handed: Promise<unknown>[] = [];
    limiter.overrides.keepAlive({ waitUntil: (work) => handed.push(work) });
    expect(handed).toHaveLength(1);
    release();
    await Promise.all(handed);
  });

  it("a first read that hangs holds requests back for firstWaitMs at most", async () => {
    const store = new WatchedStore();
    store.hold = new Promise<void>(() => {});
    const { limiter } = onRequest(store, 100);
    const started = Date.now();
    const verdict = await limiter.check(user);
    expect(verdict.action).toBe("allow");
    expect(Date.now() - started).toBeGreaterThanOrEqual(95);
    expect(Date.now() - started).toBeLessThan(2_000);
    // The requests after it do not wait again.
    const again = Date.now();
    await limiter.check(user);
    expect(Date.now() - again).toBeLessThan(50);
  });

  it("refuses a firstWaitMs that is not a whole number of 0 or more", () => {
    expect(() =>
      createLimiter({
        policy: POLICY,
        store: new MemoryStore(),
        overrides: { onRequest: { firstWaitMs: -1 } },
      }),
    ).toThrow(/firstWaitMs -1/);
  });
});
