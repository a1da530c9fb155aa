/**
 * Which rules a request matches: per tier, the policy's rules form groups of alternatives (a
 * per-path rule, a plan's rule, the tier's global rule), and a request gets the most specific
 * matching rule of each group. Every matched rule counts the request.
 */
import { GenerationalCache } from "./generational-cache.js";
import type { Identity } from "./identify.js";
import { escapeKeyPart } from "./keys.js";
import type { ResolvedPolicy, ResolvedRule } from "./model.js";
import { matchesPrefix } from "./path.js";
import type { Tier } from "./types.js";

/** A rule with what matching and counting need of it, computed once per policy. */
export interface CompiledRule {
  readonly rule: ResolvedRule;
  /** Position in the policy (indexes per-subject counter caches). */
  readonly ordinal: number;
  /** `|namespace|scope`, appended to the subject to make the counter's key. */
  readonly keySuffix: string;
  readonly methods: ReadonlySet<string> | undefined;
  readonly plans: ReadonlySet<string> | undefined;
}

/** The rules one request matched: as compiled for counting, and as the policy states them. */
export interface Match {
  readonly compiled: readonly CompiledRule[];
  readonly rules: readonly ResolvedRule[];
}

/** Paths per match-cache generation, and the longest path kept (longer ones are matched anew). */
const CACHED_PATHS_PER_GENERATION = 1024;
const MAX_CACHED_PATH_LENGTH = 256;

/**
 * Matches requests against one policy's rules. The same paths come back, so recent paths'
 * matches are kept per tier and plan (bounded): a returning path costs one lookup instead of a
 * prefix comparison per rule. The arrays handed out are shared and never mutated.
 */
export class RuleMatcher {
  readonly rules: readonly CompiledRule[];
  readonly #groups: Readonly<Record<Tier, readonly (readonly CompiledRule[])[]>>;
  /** Whether a tier has a rule that names methods (the method is then part of the cache key). */
  readonly #methodsMatter: Readonly<Record<Tier, boolean>>;
  readonly #anonymous = new GenerationalCache<Match>(CACHED_PATHS_PER_GENERATION);
  readonly #byPlan = new Map<string, GenerationalCache<Match>>();

  constructor(policy: ResolvedPolicy) {
    this.rules = policy.rules.map((rule, ordinal) => ({
      rule,
      ordinal,
      keySuffix: `|${escapeKeyPart(rule.namespace)}|${escapeKeyPart(rule.scope)}`,
      methods: rule.methods === undefined ? undefined : new Set(rule.methods),
      plans: rule.plans === undefined ? undefined : new Set(rule.plans),
    }));
    const byGroup = new Map<string, CompiledRule[]>();
    for (const compiled of this.rules) {
      const group = byGroup.get(compiled.rule.group);
      if (group === undefined) byGroup.set(compiled.rule.group, [compiled]);
      else group.push(compiled);
    }
    const groups: Record<Tier, CompiledRule[][]> = { anonymous: [], authenticated: [] };
    for (const members of byGroup.values()) {
      members.sort((a, b) => specificity(b.rule) - specificity(a.rule));
      for (const tier of ["anonymous", "authenticated"] as const) {
        const forTier = members.filter(({ rule }) => rule.tiers.includes(tier));
        if (forTier.length > 0) groups[tier].push(forTier);
      }
    }
    this.#groups = groups;
    const namesMethods = (tier: Tier) =>
      groups[tier].some((group) => group.some((rule) => rule.methods !== undefined));
    this.#methodsMatter = {
      anonymous: namesMethods("anonymous"),
      authenticated: namesMethods("authenticated"),
    };
  }

  /** The rules `identity`'s request to `path` matches, at most one per group. */
  match(identity: Identity, path: string, method: string): Match {
    if (path.length > MAX_CACHED_PATH_LENGTH) return this.#matchAll(identity, path, method);
    const cache = identity.tier === "anonymous" ? this.#anonymous : this.#planCache(identity.plan);
    const key = this.#methodsMatter[identity.tier] ? `${method.toUpperCase()} ${path}` : path;
    let rules = cache.get(key);
    if (rules === undefined) {
      rules = this.#matchAll(identity, path, method);
      cache.set(key, rules);
    }
    return rules;
  }

  #planCache(plan: string | undefined): GenerationalCache<Match> {
    const name = plan ?? "";
    let cache = this.#byPlan.get(name);
    if (cache === undefined) {
      cache = new GenerationalCache(CACHED_PATHS_PER_GENERATION);
      this.#byPlan.set(name, cache);
    }
    return cache;
  }

  #matchAll(identity: Identity, path: string, method: string): Match {
    const compiled: CompiledRule[] = [];
    const upperMethod = method.toUpperCase();
    for (const group of this.#groups[identity.tier]) {
      const found = group.find((candidate) => matches(candidate, identity, path, upperMethod));
      if (found !== undefined) compiled.push(found);
    }
    return { compiled, rules: compiled.map(({ rule }) => rule) };
  }
}

function matches(
  candidate: CompiledRule,
  identity: Identity,
  path: string,
  upperMethod: string,
): boolean {
  const { rule } = candidate;
  if (rule.pathPrefix !== undefined && !matchesPrefix(path, rule.pathPrefix)) return false;
  if (candidate.methods !== undefined && !candidate.methods.has(upperMethod)) return false;
  if (candidate.plans !== undefined) {
    if (identity.plan === undefined || !candidate.plans.has(identity.plan)) return false;
  }
  return !(rule.key === "user" && identity.userSubject === undefined);
}

/** More specific rules win within a group: plan-specific first, then methods, then the longest path. */
function specificity(rule: ResolvedRule): number {
  return (
    (rule.plans === undefined ? 0 : 1_000_000) +
    (rule.methods === undefined ? 0 : 100_000) +
    (rule.pathPrefix?.length ?? 0)
  );
}
