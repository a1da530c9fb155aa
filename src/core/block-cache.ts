import { GenerationalCache } from "./generational-cache.js";
import type { ResolvedRule } from "./model.js";
import type { CounterSpec, CounterState } from "./types.js";

const DEFAULT_MAX_KEYS = 100_000;

/**
 * Remembers counters that are hard-blocked until a known time, so that an attacker who keeps
 * hammering a blocked key costs no store round trip (and, on DynamoDB, no write) until then.
 * Other processes' counts can only push the real unblock time later, so answering locally until
 * the remembered time is never more lenient than the store. Only a reset can make the store more
 * lenient: this process's own forgets the key here, another process's is heard of within
 * `RESET_CHECK_MS` where the store keeps a log of resets (reset-watch.ts). Bounded (at most
 * `maxKeys`): a forgotten block only costs one more round trip.
 */
export class BlockCache {
  readonly #until: GenerationalCache<number>;
  hits = 0;

  constructor(maxKeys = DEFAULT_MAX_KEYS) {
    this.#until = new GenerationalCache(Math.max(1, Math.floor(maxKeys / 2)));
  }

  get size(): number {
    return this.#until.size;
  }

  /** The first enforcing counter still blocked at `now`, if any. */
  blockedUntil(
    counters: readonly CounterSpec[],
    now: number,
  ): { key: string; until: number } | undefined {
    if (this.#until.size === 0) return undefined;
    for (const counter of counters) {
      if (counter.mode !== "enforce") continue;
      const until = this.#until.get(counter.key);
      if (until === undefined) continue;
      if (until > now) return { key: counter.key, until };
      this.#until.delete(counter.key);
    }
    return undefined;
  }

  /** A request was answered from the cache: one round trip saved. */
  answered(): void {
    this.hits++;
  }

  /**
   * Forgets every block: the policy changed, and a block remembered under a rule's old window or
   * limit may be longer than the new rule's.
   */
  clear(): void {
    this.#until.clear();
  }

  /** Forgets a block (its counter was reset, here or elsewhere). */
  forget(key: string): void {
    this.#until.delete(key);
  }

  remember(counter: CounterSpec, rule: ResolvedRule, state: CounterState, now: number): void {
    // A sliding challenge rule's retry time is for the limit, not the band: do not over-block.
    if (rule.action === "challenge" && rule.algorithm !== "fixed-window") return;
    if (state.retryAfterMs <= 0) return;
    this.#until.set(counter.key, now + state.retryAfterMs);
  }
}
