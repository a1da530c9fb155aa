/**
 * A rule that no policy file wrote: a limit over a window, counted for whatever key its caller
 * gives (rls's configured descriptors, `createRateLimit`'s keys). Matching, tiers and challenges
 * are a policy's; such a rule blocks over its limit and is always disclosed.
 */
import type { ResolvedRule } from "./model.js";
import type { AlgorithmName, WindowSpec } from "./types.js";

export interface PlainRuleSpec {
  /** Its id, which is also its namespace, scope and group. */
  readonly id: string;
  readonly limit: number;
  readonly window: WindowSpec;
  readonly algorithm: AlgorithmName;
  readonly failMode: ResolvedRule["failMode"];
  /** Default `exact`; `hybrid` needs a store wrapped by `hybridCounting` (hybrid-counting.ts). */
  readonly counting?: ResolvedRule["counting"];
  /** Counted and reported, never refusing. */
  readonly shadow: boolean;
}

export function plainRule(spec: PlainRuleSpec): ResolvedRule {
  const { id } = spec;
  return {
    id,
    namespace: id,
    scope: id,
    group: id,
    tiers: [],
    plans: undefined,
    pathPrefix: undefined,
    methods: undefined,
    key: "ip",
    limit: spec.limit,
    window: spec.window,
    algorithm: spec.algorithm,
    cost: 1,
    action: "block",
    challengeBand: 1,
    shadow: spec.shadow,
    failMode: spec.failMode,
    disclose: true,
    backend: undefined,
    counting: spec.counting ?? "exact",
  };
}
