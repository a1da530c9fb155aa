/**
 * How overrides reach a request without a store round trip on its path: each limiter holds a
 * snapshot (an `OverrideTable`) that the counting step reads in memory, and refreshes it in the
 * background every `refreshMs` (default 5 s): one small read of the source's version, and the
 * whole list only when that changed. So an override set anywhere applies on every instance
 * within `refreshMs` plus one store round trip; on the instance that set it, at once
 * (`applyLocal`). A refresh that fails keeps the snapshot it has (the store's fail modes are
 * the counters' business) and tries again on the next tick.
 *
 * The timer is unref'd (it never keeps a process alive) and stops on `close`; the snapshot
 * holds at most `MAX_OVERRIDES` overrides, as the source does.
 *
 * Where a runtime runs nothing between requests (Lambda@Edge freezes an instance, a Worker's
 * isolate runs only for a request), a timer would fire late, on the request after a pause, with
 * the snapshot of before it. There `onRequest` replaces the timer: each request asks for the
 * snapshot with `tableAt(now)`, and a request that finds it older than `refreshMs` starts a
 * refresh beside itself, never waited for (a Worker hands it to its request's `waitUntil`:
 * `keepAlive`); the first read, begun by `start`, is waited for by the first requests
 * (`firstRead`), at most `firstWaitMs`. So a change applies within `refreshMs` plus a round trip on an instance that
 * keeps answering, and the first request after a pause longer than that is decided on the
 * snapshot held before it.
 *
 * Where one request cannot await I/O another began (workerd: `StoreTraits.requestScopedIo`), a
 * request that waits for the first read also waits on a timer of its own, so that it goes on
 * after `firstWaitMs` even if the request that began the read (and its timer) was cancelled.
 * There (`onRequest.requestScopedIo`) the first read also begins with the first request, not at
 * `start`: a Worker may build its limiter at module scope, where no I/O may begin. Refreshes
 * begun by requests are held (a few at most) until a request hands them to its `waitUntil`
 * (`keepAlive`).
 */

import { NO_OVERRIDES, OverrideTable } from "./override-table.js";
import { MAX_OVERRIDES, type Override, type OverrideSource } from "./overrides.js";

export interface OverrideWatchOptions {
  readonly refreshMs: number;
  /** Called when the snapshot changed (the step forgets blocks a new limit may have ended). */
  readonly onChange: () => void;
  /** Refresh on requests, not on a timer (runtimes that run nothing between requests). */
  readonly onRequest?: RefreshOnRequest | undefined;
}

export interface RefreshOnRequest {
  /** Longest a request waits for the first read (then it goes on without overrides). */
  readonly firstWaitMs: number;
  /**
   * One request cannot await I/O another began (workerd): the first read begins with the first
   * request that asks (not at `start`: a Worker may build its limiter at module scope, where no
   * I/O may begin), and each request that waits for it also waits on a timer of its own.
   */
  readonly requestScopedIo?: boolean | undefined;
}

/** Refreshes held for `keepAlive`: more in flight at once means the older ones were cut off. */
const MAX_KEPT = 4;

export class OverrideWatch {
  readonly source: OverrideSource;
  readonly #options: OverrideWatchOptions;
  #table: OverrideTable = NO_OVERRIDES;
  #version: string | undefined;
  /** Bumped by each local change: a refresh begun before one must not undo it. */
  #generation = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #closed = false;
  #first: Promise<void> | undefined;
  /** `onRequest`: the first read, while requests still wait for it. */
  #waitFirst: Promise<void> | undefined;
  /** `onRequest`: when the refresh in flight (or the last one) began, on the requests' clock. */
  #refreshedAt = Number.NEGATIVE_INFINITY;
  /** `onRequest`: the first read has settled; the next request stamps its time as the last refresh's. */
  #stampNext = false;
  #refreshing = false;
  /** `onRequest`: when requests stop waiting for the first read (epoch ms). */
  #firstUntil = 0;
  /** `onRequest`: refreshes in flight, for `keepAlive` (at most `MAX_KEPT`). */
  readonly #inFlight = new Set<Promise<void>>();
  /** `requestScopedIo`: `start` was called; the first request begins the first read. */
  #startWanted = false;

  constructor(source: OverrideSource, options: OverrideWatchOptions) {
    this.source = source;
    this.#options = options;
  }

  /** The overrides held now (read on every counted request). */
  get table(): OverrideTable {
    return this.#table;
  }

  /**
   * The overrides held at `now`; with `onRequest`, starts a refresh when the last began
   * `refreshMs` ago or more (and none is in flight, unless that one began as long ago: a
   * Worker may cancel work left after its answer).
   */
  tableAt(now: number): OverrideTable {
    const onRequest = this.#options.onRequest;
    if (onRequest === undefined || this.#closed) return this.#table;
    if (this.#startWanted) this.#begin(onRequest);
    if (this.#stampNext) {
      this.#stampNext = false;
      this.#refreshedAt = now;
    }
    const age = now - this.#refreshedAt;
    if (
      age >= this.#options.refreshMs &&
      (!this.#refreshing || age >= 2 * this.#options.refreshMs)
    ) {
      this.#refreshedAt = now;
      this.#refreshing = true;
      const work = this.refresh().finally(() => {
        this.#refreshing = false;
      });
      this.#hand(work);
    }
    return this.#table;
  }

  /**
   * With `onRequest`, until the first read has settled (or `firstWaitMs` passed): what a
   * request waits for before it counts. Otherwise undefined.
   */
  firstRead(): Promise<void> | undefined {
    const onRequest = this.#options.onRequest;
    if (onRequest === undefined) return undefined;
    if (this.#startWanted) this.#begin(onRequest);
    const first = this.#waitFirst;
    if (first === undefined || onRequest.requestScopedIo !== true) return first;
    // This request's own timer: the one `#begin` set belongs to the request that began the read.
    const left = this.#firstUntil - Date.now();
    if (left <= 0) return undefined;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const waited = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, left);
    });
    return Promise.race([first, waited]).finally(() => clearTimeout(timer));
  }

  /**
   * Hands the refreshes in flight to a request's `waitUntil`, so that the runtime does not cut
   * them off with its answer (a Worker: `ctx.waitUntil`). Any request may keep any of them.
   */
  keepAlive(waitUntil: (work: Promise<void>) => void): void {
    for (const work of this.#inFlight) waitUntil(work);
  }

  /**
   * Reads the source now and then every `refreshMs` (with `onRequest`, when requests find the
   * snapshot that old); resolves after the first read.
   */
  start(): Promise<void> {
    if (this.#first !== undefined) return this.#first;
    const onRequest = this.#options.onRequest;
    if (onRequest === undefined) {
      this.#first = this.#tick();
      return this.#first;
    }
    this.#refreshedAt = Number.POSITIVE_INFINITY; // no request starts another before this one
    if (onRequest.requestScopedIo === true) {
      this.#startWanted = true;
      this.#first = Promise.resolve();
      return this.#first;
    }
    this.#first = this.#firstReadNow(onRequest);
    return this.#first;
  }

  /** Reads the source now (when its version changed). Never rejects. */
  async refresh(): Promise<void> {
    const generation = this.#generation;
    try {
      const version = await this.source.version();
      if (version === this.#version) return;
      const overrides = await this.source.list();
      if (this.#closed || generation !== this.#generation) return;
      this.#version = version;
      this.#replace(overrides.slice(0, MAX_OVERRIDES));
    } catch {
      // Keep the snapshot held; the next tick tries again.
    }
  }

  /** Holds `override` at once (this instance set it), before the next refresh confirms it. */
  applyLocal(override: Override): void {
    const kept = this.#table.all.filter(
      (held) => held.subject !== override.subject || held.scope !== override.scope,
    );
    this.#local([...kept, override]);
  }

  /** Drops the override of `subject` and `scope` at once (this instance removed it). */
  removeLocal(subject: string, scope: string): void {
    this.#local(this.#table.all.filter((held) => held.subject !== subject || held.scope !== scope));
  }

  close(): void {
    this.#closed = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #local(overrides: readonly Override[]): void {
    this.#generation++;
    this.#version = undefined;
    this.#replace(overrides);
  }

  #replace(overrides: readonly Override[]): void {
    const before = this.#table;
    this.#table = overrides.length === 0 ? NO_OVERRIDES : new OverrideTable(overrides);
    // None held before nor now (a first read of a store with none): no block to forget, and a
    // decision counting meanwhile may keep its block (count-step.ts forgets those of a change).
    if (before === NO_OVERRIDES && this.#table === NO_OVERRIDES) return;
    try {
      this.#options.onChange();
    } catch {
      // An observer must never stop the refresh.
    }
  }

  /** `requestScopedIo`: the first request that asks begins the first read. */
  #begin(onRequest: RefreshOnRequest): void {
    this.#startWanted = false;
    if (!this.#closed) this.#first = this.#firstReadNow(onRequest);
  }

  #firstReadNow(onRequest: RefreshOnRequest): Promise<void> {
    this.#firstUntil = Date.now() + onRequest.firstWaitMs;
    this.#refreshing = true;
    const first = this.refresh().finally(() => {
      this.#refreshing = false;
      this.#stampNext = true;
    });
    let timer: ReturnType<typeof setTimeout> | undefined;
    const waited = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, onRequest.firstWaitMs);
      (timer as { unref?: () => void }).unref?.();
    });
    this.#waitFirst = Promise.race([first, waited]).finally(() => {
      clearTimeout(timer);
      this.#waitFirst = undefined;
      // A first read cut off with the request that began it never settles: from the next
      // request on, the age rule starts another (a refresh in flight for 2 refreshes is lost).
      if (this.#refreshing) this.#stampNext = true;
    });
    this.#hand(first);
    return first;
  }

  /** Keeps `work` for `keepAlive` while it runs. */
  #hand(work: Promise<void>): void {
    if (this.#inFlight.size >= MAX_KEPT) {
      // The oldest was cut off (it would have settled): no request need keep it any longer.
      const [oldest] = this.#inFlight;
      if (oldest !== undefined) this.#inFlight.delete(oldest);
    }
    this.#inFlight.add(work);
    void work.finally(() => this.#inFlight.delete(work));
  }

  async #tick(): Promise<void> {
    await this.refresh();
    if (this.#closed) return;
    const timer = setTimeout(() => void this.#tick(), this.#options.refreshMs);
    (timer as { unref?: () => void }).unref?.();
    this.#timer = timer;
  }
}
