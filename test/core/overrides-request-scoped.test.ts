/**
 * Overrides on a store whose I/O belongs to one request (`StoreTraits.requestScopedIo`: Redis
 * over HTTP and DynamoDB over fetch in workerd). Nothing runs between a Worker's requests, so
 * the limiter refreshes its copy on requests without being told (`overrides.onRequest`, with
 * the Worker's defaults), begins no read before the first request (a Worker may build it at
 * module scope, where no I/O may begin), and hands reads in flight to a request's `waitUntil`.
 * workerd itself: test/redis-rest/overrides-workerd.test.ts, test/dynamodb/overrides-workerd.test.ts.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createLimiter, type Limiter } from "../../src/limiter.js";
import { definePolicy } from "../../src/policy/load.js";
import type { MemoryStore } from "../../src/stores/memory.js";
import { WatchedStore } from "../support/watched-store.js";

const T0 = Date.UTC(2026, 11, 2, 12, 0, 10);
// The `overrides:` section turns reading on where I/O is request-scoped (none without it).
const POLICY = definePolicy({
  tiers: { anonymous: { global: { limit: 3, window: "1h" } } },
  overrides: {},
});
const client = { ip: "203.0.113.7", path: "/api/x" };

/** A memory store that says its I/O is request-scoped; its overrides count reads and can hang. */
class RequestScopedStore extends WatchedStore {
  constructor() {
    super({ requestScopedIo: true });
  }
}

const open: Limiter[] = [];
afterEach(() => {
  for (const limiter of open.splice(0)) limiter.close();
});

function limiterOn(
  store: MemoryStore,
  overrides?: Parameters<typeof createLimiter>[0]["overrides"],
) {
  let clock = T0;
  const limiter = createLimiter({ policy: POLICY, store, clock: () => clock, overrides });
  open.push(limiter);
  return { limiter, advance: (ms: number) => (clock += ms) };
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("overrides on a store with request-scoped I/O", () => {
  it("are read on requests, not by a timer: none before the first request, then one per 5 s of requests", async () => {
    const store = new RequestScopedStore();
    const shared = limiterOn(store).limiter; // an operator's copy on the same store
    await shared.overrides.set({ subject: "ip:203.0.113.7", limit: 50 });
    const readsBefore = store.versionReads;
    const { limiter, advance } = limiterOn(store);
    await pause(30);
    expect(store.versionReads).toBe(readsBefore);
    // The first request begins the first read and waits for it.
    expect((await limiter.check(client)).limit).toBe(50);
    expect(store.versionReads).toBe(readsBefore + 1);
    advance(4_999);
    await limiter.check(client);
    expect(store.versionReads).toBe(readsBefore + 1);
    advance(1);
    await limiter.check(client);
    expect(store.versionReads).toBe(readsBefore + 2);
  });

  it("hands the read in flight to a request's waitUntil (limiter.overrides.keepAlive)", async () => {
    const store = new RequestScopedStore();
    const { limiter, advance } = limiterOn(store);
    await limiter.check(client);
    let release = () => {};
    store.hold = new Promise<void>((resolve) => {
      release = resolve;
    });
    advance(5_000);
    await limiter.check(client);
    const kept: Promise<unknown>[] = [];
    limiter.overrides.keepAlive({ waitUntil: (work) => kept.push(work) });
    expect(kept).toHaveLength(1);
    release();
    await Promise.all(kept);
    const after: Promise<unknown>[] = [];
    limiter.overrides.keepAlive({ waitUntil: (work) => after.push(work) });
    expect(after).toEqual([]);
  });

  it("a first read cut off with the request that began it holds no request past firstWaitMs, and requests read again after two refreshes", async () => {
    const store = new RequestScopedStore();
    store.hold = new Promise<void>(() => {}); // never settles, as a read workerd cancelled
    const { limiter, advance } = limiterOn(store, {
      refreshMs: 1_000,
      onRequest: { firstWaitMs: 50 },
    });
    const started = Date.now();
    expect((await limiter.check(client)).action).toBe("allow");
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(store.versionReads).toBe(1);
    store.hold = undefined;
    await pause(100); // the first read's wait is over for every request
    // The next request's time stands for the lost read's: another begins two refreshes after it.
    await limiter.check(client);
    expect(store.versionReads).toBe(1);
    advance(1_999);
    await limiter.check(client);
    expect(store.versionReads).toBe(1);
    advance(1);
    await limiter.check(client);
    expect(store.versionReads).toBe(2);
  });

  it("reads none by default for a policy without an overrides: section (a Worker's isolates would each pay reads)", async () => {
    const store = new RequestScopedStore();
    const limiter = createLimiter({
      policy: definePolicy({ tiers: { anonymous: { global: { limit: 3, window: "1h" } } } }),
      store,
    });
    open.push(limiter);
    for (let i = 0; i < 3; i++) await limiter.check(client);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(store.versionReads).toBe(0);
    expect(limiter.heldOverrides).toBeUndefined();
  });
});
