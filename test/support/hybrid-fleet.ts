/**
 * A fleet of processes sharing one store, as a gateway's workers or Lambda@Edge instances do:
 * each limiter has its own hybrid layer (and, when given, its own store client). Bursts of
 * concurrent requests from one subject hit every process at once, round after round.
 */

import { hybridCounting } from "../../src/core/hybrid-counting.js";
import type { CounterSpec, Store } from "../../src/core/types.js";
import { createLimiter } from "../../src/limiter.js";
import type { ResolvedPolicy } from "../../src/policy/types.js";

export interface FleetResult {
  readonly sent: number;
  readonly admitted: number;
}

export async function burstFleet(options: {
  readonly policy: ResolvedPolicy;
  /** One store (client) per process. */
  readonly stores: readonly Store[];
  readonly ip: string;
  readonly rounds: number;
  readonly perProcess: number;
  /** Epoch ms of the first round; each round is `stepMs` later (same window throughout). */
  readonly start: number;
  readonly stepMs: number;
}): Promise<FleetResult> {
  let now = options.start;
  const limiters = options.stores.map((store) =>
    createLimiter({
      policy: options.policy,
      // Each process builds hybrid counting in front of its store, as a deployment does.
      store: hybridCounting(store),
      clock: () => now,
      onStoreError: () => {},
      // Counting only: no background reads of the store's overrides among the calls measured.
      overrides: false,
    }),
  );
  let sent = 0;
  let admitted = 0;
  for (let round = 0; round < options.rounds; round++) {
    now = options.start + round * options.stepMs;
    const verdicts = await Promise.all(
      limiters.flatMap((limiter) =>
        Array.from({ length: options.perProcess }, () =>
          limiter.check({ ip: options.ip, path: "/" }),
        ),
      ),
    );
    sent += verdicts.length;
    for (const verdict of verdicts) {
      if (verdict.reason.startsWith("store-failed")) {
        throw new Error(`a request's store failed (${verdict.reason})`);
      }
      if (verdict.action === "allow") admitted++;
    }
  }
  return { sent, admitted };
}

/** The policy's first rule's counter for `subject`, as an observer of cost 0 (reads the count). */
export function readCounter(policy: ResolvedPolicy, subject: string): CounterSpec {
  const rule = policy.rules[0];
  if (rule === undefined) throw new Error("the policy has no rule");
  return {
    key: `${subject}|${rule.namespace}|${rule.scope}`,
    subject,
    algorithm: rule.algorithm,
    limit: rule.limit,
    window: rule.window,
    cost: 0,
    mode: "observe",
    ruleId: rule.id,
    namespace: rule.namespace,
    counting: rule.counting,
  };
}
