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
 */

import { NO_OVERRIDES, OverrideTable } from "./override-table.js";
import { MAX_OVERRIDES, type Override, type OverrideSource } from "./overrides.js";

export interface OverrideWatchOptions {
  readonly refreshMs: number;
  /** Called when the snapshot changed (the step forgets blocks a new limit may have ended). */
  readonly onChange: () => void;
}

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

  constructor(source: OverrideSource, options: OverrideWatchOptions) {
    this.source = source;
    this.#options = options;
  }

  /** The overrides held now (read on every counted request). */
  get table(): OverrideTable {
    return this.#table;
  }

  /** Reads the source now and then every `refreshMs`; resolves after the first read. */
  start(): Promise<void> {
    this.#first ??= this.#tick();
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
    this.#table = overrides.length === 0 ? NO_OVERRIDES : new OverrideTable(overrides);
    try {
      this.#options.onChange();
    } catch {
      // An observer must never stop the refresh.
    }
  }

  async #tick(): Promise<void> {
    await this.refresh();
    if (this.#closed) return;
    const timer = setTimeout(() => void this.#tick(), this.#options.refreshMs);
    (timer as { unref?: () => void }).unref?.();
    this.#timer = timer;
  }
}
