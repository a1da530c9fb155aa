import type { Decision } from "../core/decision.js";
import { DecisionEngine } from "../core/engine.js";
import type { ResolvedPolicy } from "../core/model.js";
import type { RequestDescription } from "../core/types.js";
import { type MemoryStore, memoryStore } from "../stores/memory.js";

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

  constructor(policy: ResolvedPolicy) {
    this.policy = policy;
    this.store = memoryStore();
    this.#engine = new DecisionEngine({
      policy,
      store: this.store,
      clock: () => this.#now,
      blockCache: false,
    });
  }

  /** The decision for `request` at `at` (epoch ms). */
  decide(request: RequestDescription, at: number): Decision | Promise<Decision> {
    this.#now = at;
    return this.#engine.decide(request);
  }
}
