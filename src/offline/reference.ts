import type { Decision } from "../core/decision.js";
import { DecisionEngine } from "../core/engine.js";
import type { ResolvedPolicy } from "../core/model.js";
import { OverrideWatch } from "../core/override-watch.js";
import type { Override } from "../core/overrides.js";
import type { RequestDescription } from "../core/types.js";
import { type MemoryStore, memoryStore } from "../stores/memory.js";
import { MemoryOverrides } from "../stores/memory-overrides.js";

/**
 * The real decision engine on a memory store, on a virtual clock: each request is decided at
 * the time it is given (a log line's, a simulated arrival's), exactly, with no network and no
 * block cache. Replay drives a policy over a log with it; the simulator measures every mode
 * against it. Decisions are synchronous unless the engine has to wait, which on a memory store
 * it does not.
 */
export class ReferenceEngine {
  readonly policy: ResolvedPolicy;
  readonly store: MemoryStore;
  readonly #engine: DecisionEngine;
  #now = 0;

  /** `overrides`: held from the start (replay --overrides), never refreshed: nothing else sets any. */
  constructor(policy: ResolvedPolicy, overrides: readonly Override[] = []) {
    this.policy = policy;
    this.store = memoryStore();
    this.#engine = new DecisionEngine({
      policy,
      store: this.store,
      clock: () => this.#now,
      blockCache: false,
      overrideWatch: heldOverrides(overrides),
    });
  }

  /** The decision for `request` at `at` (epoch ms). */
  decide(request: RequestDescription, at: number): Decision | Promise<Decision> {
    this.#now = at;
    return this.#engine.decide(request);
  }
}

/**
 * Overrides held by an engine from the start and never refreshed (replay and simulate
 * `--overrides`: nothing else sets any); undefined for none.
 */
export function heldOverrides(overrides: readonly Override[]): OverrideWatch | undefined {
  if (overrides.length === 0) return undefined;
  const watch = new OverrideWatch(new MemoryOverrides(), { refreshMs: 0, onChange: () => {} });
  for (const override of overrides) watch.applyLocal(override);
  return watch;
}
