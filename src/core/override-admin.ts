/**
 * Setting, listing and removing overrides: `limiter.overrides` and `edgelimit override`. Every
 * override is checked against the policy before it is stored (core/overrides.ts), every change
 * is logged by the source with its time and note, and on a limiter the change applies at once
 * on that instance (override-watch.ts); the others read it within their refresh.
 */
import type { ResolvedPolicy } from "./model.js";
import type { OverrideWatch } from "./override-watch.js";
import {
  canonicalSubject,
  checkOverride,
  MAX_OVERRIDES,
  type Override,
  type OverrideChange,
  type OverrideInput,
  type OverrideSource,
  type OverrideTarget,
  scopeOf,
} from "./overrides.js";

export class OverrideAdmin {
  readonly source: OverrideSource;
  readonly #policy: () => ResolvedPolicy;
  readonly #clock: () => number;
  readonly #watch: OverrideWatch | undefined;

  /** `watch`: the limiter's snapshot, updated at once by this instance's changes. */
  constructor(
    source: OverrideSource,
    policy: () => ResolvedPolicy,
    clock: () => number,
    watch?: OverrideWatch,
  ) {
    this.source = source;
    this.#policy = policy;
    this.#clock = clock;
    this.#watch = watch;
  }

  /**
   * Checks and stores an override (replacing the one with its subject and scope). Rejects with
   * an `EdgelimitError` for input the policy does not allow; nothing is stored then.
   */
  async set(input: OverrideInput): Promise<Override> {
    const now = this.#clock();
    const override = checkOverride(input, this.#policy(), now);
    await this.source.put(override, now, MAX_OVERRIDES);
    this.#watch?.applyLocal(override);
    return override;
  }

  /** The overrides in force now (not expired), in the order they were set. */
  async list(): Promise<Override[]> {
    const now = this.#clock();
    const all = await this.source.list();
    return all
      .filter((override) => override.until === undefined || override.until > now)
      .sort((a, b) => a.setAt - b.setAt);
  }

  /** Removes the override of this subject and scope; resolves whether there was one. */
  async remove(target: OverrideTarget & { readonly note?: string | undefined }): Promise<boolean> {
    const subject = canonicalSubject(target.subject);
    const scope = scopeOf(target, undefined);
    const at = this.#clock();
    const change: OverrideChange = { at, action: "remove", subject, scope };
    const removed = await this.source.delete(
      subject,
      scope,
      target.note === undefined ? change : { ...change, note: target.note },
    );
    this.#watch?.removeLocal(subject, scope);
    return removed;
  }

  /** The newest `count` changes (default 100), oldest first. */
  changes(count = 100): Promise<readonly OverrideChange[]> {
    return this.source.changes(count);
  }

  /**
   * Hands this limiter's reads of the overrides in flight to a request's `waitUntil`, so that the
   * runtime does not cut them off with its answer: where requests refresh them (a Worker: stores
   * with `requestScopedIo`), call it with the request's `ctx` after `check`; `edgelimit/fetch`
   * does when it is given the ctx. Nothing to hand where a timer reads them.
   */
  keepAlive(ctx: { waitUntil(work: Promise<unknown>): void }): void {
    this.#watch?.keepAlive((work) => ctx.waitUntil(work));
  }
}
