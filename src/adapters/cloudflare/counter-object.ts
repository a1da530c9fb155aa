import { ALGORITHMS, applyCounters } from "../../core/algorithms/index.js";
import type { CounterSpec } from "../../core/types.js";
import { LATE_GRACE_MS, windowAt, windowLengthMs } from "../../core/windows.js";
import { AREA_PATH, AreaLedger } from "./area-object.js";
import type { DurableObjectStateLike, WorkerEnv } from "./bindings.js";
import {
  type Entries,
  holdingFor,
  limitedBy,
  type OpenedEntries,
  parseRelease,
  RELEASE_PATH,
  type ReleaseRequest,
  release,
  withHolding,
} from "./held-back.js";
import { isOverridesKey, OVERRIDES_PATH, OverrideLedger } from "./override-object.js";
import {
  APPLY_PATH,
  type CounterObjectAnswer,
  type CounterObjectRequest,
  REFUND_PATH,
} from "./protocol.js";

interface StoredCounter {
  // biome-ignore lint/suspicious/noExplicitAny: the algorithm's own state, opaque here.
  readonly state: any;
  readonly expiresAt: number;
}

/**
 * The exact counter: a Durable Object per counter key (the Worker addresses it with
 * `idFromName(key)`), so there is no global object and each key is serialised on its own.
 *
 * Counts live in memory and in the object's transactional storage. A request is applied
 * synchronously on the in-memory copy, so two requests can never interleave between a read and
 * a write; the write that follows is held by the runtime's output gate, so no answer leaves the
 * object before its count is durable. An alarm at the latest expiry deletes the state, so an idle
 * key costs no storage after its window (a daily quota is gone a day later, a monthly one at the
 * end of the month).
 */
export class EdgelimitCounter {
  readonly #storage: DurableObjectStateLike["storage"];
  readonly #counters = new Map<string, StoredCounter>();
  #alarmAt: number | undefined;
  /** Made by the first call to `/overrides/…`: only the `{overrides}` object gets one. */
  #overrides: OverrideLedger | undefined;
  /** Made by the first call to `/area/…`: only an area object gets one (area-object.ts). */
  #area: AreaLedger | undefined;
  readonly #env: WorkerEnv;

  constructor(state: DurableObjectStateLike, env: WorkerEnv = {}) {
    this.#storage = state.storage;
    this.#env = env;
    void state.blockConcurrencyWhile(async () => {
      const stored = await this.#storage.list<StoredCounter>();
      for (const [key, counter] of stored) {
        if (!isOverridesKey(key)) this.#counters.set(key, counter);
      }
      this.#alarmAt = (await this.#storage.getAlarm()) ?? undefined;
    });
  }

  async fetch(request: Request): Promise<Response> {
    const { pathname } = new URL(request.url);
    if (pathname.startsWith(OVERRIDES_PATH)) {
      // The operators' overrides (override-object.ts): the object named `{overrides}` holds them.
      this.#overrides ??= new OverrideLedger(this.#storage);
      return this.#overrides.handle(request, pathname.slice(OVERRIDES_PATH.length));
    }
    if (pathname.startsWith(AREA_PATH)) {
      // An area object (area-object.ts): its allowances are entries of this object.
      this.#area ??= new AreaLedger(this.#env, (now) => this.#open(now));
      return this.#area.handle(request, pathname.slice(AREA_PATH.length));
    }
    if (request.method === "POST" && pathname === RELEASE_PATH) {
      let asked: ReleaseRequest;
      try {
        asked = parseRelease(await request.json());
      } catch (error) {
        return new Response(error instanceof Error ? error.message : "bad request", {
          status: 400,
        });
      }
      const opened = this.#open(Date.now());
      const given = release(opened.entries, asked);
      await opened.save();
      return Response.json({ given });
    }
    if (request.method !== "POST" || (pathname !== APPLY_PATH && pathname !== REFUND_PATH)) {
      return new Response("not found", { status: 404 });
    }
    let body: CounterObjectRequest;
    try {
      body = parseRequest(await request.json());
    } catch (error) {
      return new Response(error instanceof Error ? error.message : "bad request", { status: 400 });
    }
    // One clock for every Worker that calls this object: the later of the caller's and its own.
    // Counts never depend on which isolate's clock is behind (a window never moves backwards
    // anyway: see countedAt in core/algorithms), and a caller far behind cannot stretch a window.
    const now = Math.max(body.now, Date.now());
    if (pathname === REFUND_PATH) {
      await this.#persist(this.#refund(body.counters, now));
      return new Response(null, { status: 204 });
    }
    const { answer, changed } = this.#apply(body.counters, now, body.held ?? 0);
    await this.#persist(changed);
    return Response.json(answer);
  }

  /** Deletes what has expired; re-arms for what has not (a key that kept being hit). */
  async alarm(): Promise<void> {
    const now = Date.now();
    const expired: string[] = [];
    let latest = 0;
    for (const [key, counter] of this.#counters) {
      if (counter.expiresAt + LATE_GRACE_MS <= now) expired.push(key);
      else latest = Math.max(latest, counter.expiresAt + LATE_GRACE_MS);
    }
    for (const key of expired) this.#counters.delete(key);
    this.#alarmAt = undefined;
    if (this.#counters.size === 0) {
      await this.#storage.deleteAll();
      return;
    }
    if (expired.length > 0) await this.#storage.delete(expired);
    this.#alarmAt = latest;
    await this.#storage.setAlarm(latest);
  }

  #lookup(key: string, now: number): StoredCounter | undefined {
    const counter = this.#counters.get(key);
    // Kept a little past its expiry, for a request that reaches the object late (LATE_GRACE_MS).
    return counter !== undefined && counter.expiresAt + LATE_GRACE_MS > now ? counter : undefined;
  }

  /** This object's entries as of `now`, and the write of what was changed in them. */
  #open(now: number): OpenedEntries {
    const changed: Record<string, StoredCounter> = {};
    return { entries: this.#entries(now, changed), save: () => this.#persist(changed) };
  }

  /**
   * This object's entries as of `now`, whose writes are kept in memory and in `changed` (for
   * `#persist`).
   */
  #entries(now: number, changed: Record<string, StoredCounter> = {}): Entries {
    return {
      get: (key) => this.#lookup(key, now),
      set: (key, state, expiresAt) => {
        const current = { state, expiresAt };
        this.#counters.set(key, current);
        changed[key] = current;
      },
    };
  }

  /**
   * The store contract's three steps (`applyCounters`), for the counters held by this object;
   * with areas, the units held back for their allowances count as counted (held-back.ts).
   */
  #apply(
    counters: readonly CounterSpec[],
    now: number,
    far: number,
  ): { answer: CounterObjectAnswer; changed: Record<string, StoredCounter> } {
    const changed: Record<string, StoredCounter> = {};
    const entries = this.#entries(now, changed);
    const holdings = counters.map((spec) =>
      far === 0 ? undefined : holdingFor(entries, spec, now, far),
    );
    const limited = counters.map((spec, i) => limitedBy(spec, holdings[i]));
    const { states, admitted } = applyCounters(limited, now, {
      get: (spec) => entries.get(spec.key)?.state,
      set: (spec, state, expiresAt) => entries.set(spec.key, state, expiresAt),
    });
    // The object's clock goes with each answer: hybrid counting's reservations follow it.
    const answer = {
      states: states.map((state, i) => withHolding({ ...state, storeNow: now }, holdings[i])),
      admitted,
    };
    return { answer, changed };
  }

  /**
   * Takes back a request that this object admitted but another counter refused, so that a
   * refused request spends no quota here (the store contract). Only the current window is
   * refunded: a window that has rolled over since holds nothing of that request.
   */
  #refund(counters: readonly CounterSpec[], now: number): Record<string, StoredCounter> {
    const changed: Record<string, StoredCounter> = {};
    for (const spec of counters) {
      if (spec.mode !== "enforce") continue;
      const current = this.#lookup(spec.key, now);
      if (current === undefined) continue;
      let state = current.state;
      if (spec.algorithm === "token-bucket") {
        const step = windowLengthMs(spec.window, now) / spec.limit;
        state = { tat: Math.max(now, state.tat - spec.cost * step) };
      } else if (state.index === windowAt(spec.window, now).index) {
        state = { ...state, count: Math.max(0, state.count - spec.cost) };
      } else {
        continue;
      }
      const refunded = { state, expiresAt: current.expiresAt };
      this.#counters.set(spec.key, refunded);
      changed[spec.key] = refunded;
    }
    return changed;
  }

  async #persist(changed: Record<string, StoredCounter>): Promise<void> {
    let latest = 0;
    for (const key in changed) latest = Math.max(latest, (changed[key] as StoredCounter).expiresAt);
    if (latest === 0) return;
    const writes: Promise<void>[] = [this.#storage.put(changed)];
    latest += LATE_GRACE_MS;
    if (this.#alarmAt === undefined || latest > this.#alarmAt) {
      this.#alarmAt = latest;
      writes.push(this.#storage.setAlarm(latest));
    }
    await Promise.all(writes);
  }
}

/** Only a Worker of ours talks to this object, but a malformed body must not corrupt a count. */
function parseRequest(input: unknown): CounterObjectRequest {
  const body = input as Partial<CounterObjectRequest> | null;
  if (body === null || typeof body !== "object" || !Array.isArray(body.counters)) {
    throw new TypeError("expected { counters: CounterSpec[], now: number }");
  }
  if (typeof body.now !== "number" || !Number.isFinite(body.now)) {
    throw new TypeError("now must be a finite number (epoch ms)");
  }
  for (const spec of body.counters) {
    if (typeof spec?.key !== "string" || !Object.hasOwn(ALGORITHMS, spec.algorithm)) {
      throw new TypeError("each counter needs a key and a known algorithm");
    }
    // A cost of 0 reads a counter without spending it (hybrid counting reads its fence so).
    if (!(spec.limit >= 0 && spec.cost >= 0 && typeof spec.window === "object")) {
      throw new TypeError(`counter ${spec.key}: limit, cost and window are required`);
    }
  }
  if (body.held !== undefined && !(Number.isInteger(body.held) && body.held >= 0)) {
    throw new TypeError("held must be a whole number of areas");
  }
  return body.held === undefined
    ? { counters: body.counters, now: body.now }
    : { counters: body.counters, now: body.now, held: body.held };
}
