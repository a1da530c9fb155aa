/**
 * Which rules a request matches: per tier, the policy's rules form groups of alternatives (a
 * per-path rule, a plan's rule, the tier's global rule), and a request gets the most specific
 * matching rule of each group. Every matched rule counts the request. A path is matched in
 * each of its spellings (see path.ts): where origins would route it differently, each spelling's
 * rule counts it, so a group may then give more than one.
 */
import { GenerationalCache } from "./generational-cache.js";
import type { Identity } from "./identify.js";
import { escapeKeyPart } from "./keys.js";
import type { ResolvedPolicy, ResolvedRule } from "./model.js";
import { matchesPrefix, type Spelling, spellingsOf } from "./path.js";
import type { RequestDescription, Tier } from "./types.js";

/** A rule with what matching and counting need of it, computed once per policy. */
export interface CompiledRule {
  readonly rule: ResolvedRule;
  /** Position in the policy (indexes per-subject counter caches). */
  readonly ordinal: number;
  /** `|namespace|scope`, appended to the subject to make the counter's key. */
  readonly keySuffix: string;
  /** The rule's path prefix in lower case, for the spellings of a path in lower case. */
  readonly foldedPrefix: string | undefined;
  readonly methods: ReadonlySet<string> | undefined;
  readonly plans: ReadonlySet<string> | undefined;
}

/** The rules one request matched: as compiled for counting, and as the policy states them. */
export interface Match {
  readonly compiled: readonly CompiledRule[];
  readonly rules: readonly ResolvedRule[];
  /** Whether a spelling of the path falls under one of the policy's `failClosed` prefixes. */
  readonly failClosedPath: boolean;
}

/** Paths per match-cache generation, and the longest path kept (longer ones are matched anew). */
const CACHED_PATHS_PER_GENERATION = 1024;
const MAX_CACHED_PATH_LENGTH = 256;

/** Recent paths' matches for one way of routing letter case, per tier and plan (bounded). */
class MatchCache {
  readonly #anonymous = new GenerationalCache<Match>(CACHED_PATHS_PER_GENERATION);
  readonly #byPlan = new Map<string, GenerationalCache<Match>>();

  of(identity: Identity): GenerationalCache<Match> {
    if (identity.tier === "anonymous") return this.#anonymous;
    const name = identity.plan ?? "";
    let cache = this.#byPlan.get(name);
    if (cache === undefined) {
      cache = new GenerationalCache(CACHED_PATHS_PER_GENERATION);
      this.#byPlan.set(name, cache);
    }
    return cache;
  }
}

/**
 * Matches requests against one policy's rules. The same paths come back, so recent paths'
 * matches are kept per way of routing letter case, tier and plan (bounded): a returning path
 * costs one lookup instead of a prefix comparison per rule and spelling. The arrays handed out
 * are shared and never mutated.
 */
export class RuleMatcher {
  readonly rules: readonly CompiledRule[];
  readonly #groups: Readonly<Record<Tier, readonly (readonly CompiledRule[])[]>>;
  /** Whether a tier has a rule that names methods (the method is then part of the cache key). */
  readonly #methodsMatter: Readonly<Record<Tier, boolean>>;
  /** The policy's `paths.caseSensitive`; undefined: as the request's framework routes. */
  readonly #caseSensitive: boolean | undefined;
  /** The policy's `failClosed` prefixes as written (canonical) and in lower case. */
  readonly #failClosed: readonly string[];
  readonly #failClosedFolded: readonly string[];
  /** By `caseSensitive`: "true", "false", "undefined". */
  readonly #caches: Readonly<Record<string, MatchCache>> = {
    true: new MatchCache(),
    false: new MatchCache(),
    undefined: new MatchCache(),
  };

  constructor(policy: ResolvedPolicy) {
    // `?.`: a resolved policy kept as JSON by an earlier version (a Worker's var) has no `paths`.
    this.#caseSensitive = policy.paths?.caseSensitive;
    this.#failClosed = policy.failClosedPaths;
    this.#failClosedFolded = policy.failClosedPaths.map((prefix) => prefix.toLowerCase());
    this.rules = policy.rules.map((rule, ordinal) => ({
      rule,
      ordinal,
      keySuffix: `|${escapeKeyPart(rule.namespace)}|${escapeKeyPart(rule.scope)}`,
      foldedPrefix: rule.pathPrefix?.toLowerCase(),
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

  /**
   * The rules `identity`'s request to `path` (canonical: `normalizePath`'s) matches, the most
   * specific of each group for each spelling of the path (see `spellingsOf`): letter case as the
   * policy says, else as the request's framework routes (`caseSensitiveRouting`), else both.
   */
  match(
    identity: Identity,
    path: string,
    request: Pick<RequestDescription, "method" | "caseSensitiveRouting">,
  ): Match {
    const method = request.method ?? "GET";
    const caseSensitive = this.#caseSensitive ?? request.caseSensitiveRouting;
    if (path.length > MAX_CACHED_PATH_LENGTH)
      return this.#matchAll(identity, path, method, caseSensitive);
    const cache = (this.#caches[String(caseSensitive)] as MatchCache).of(identity);
    const key = this.#methodsMatter[identity.tier] ? `${method.toUpperCase()} ${path}` : path;
    let rules = cache.get(key);
    if (rules === undefined) {
      rules = this.#matchAll(identity, path, method, caseSensitive);
      cache.set(key, rules);
    }
    return rules;
  }

  #failsClosed(spellings: readonly Spelling[]): boolean {
    if (this.#failClosed.length === 0) return false;
    return spellings.some(({ path, folded }) =>
      (folded ? this.#failClosedFolded : this.#failClosed).some((prefix) =>
        matchesPrefix(path, prefix),
      ),
    );
  }

  #matchAll(
    identity: Identity,
    path: string,
    method: string,
    caseSensitive: boolean | undefined,
  ): Match {
    const spellings = spellingsOf(path, caseSensitive);
    const compiled: CompiledRule[] = [];
    const upperMethod = method.toUpperCase();
    for (const group of this.#groups[identity.tier]) {
      for (const spelling of spellings) {
        const found = group.find((candidate) =>
          matches(candidate, identity, spelling, upperMethod),
        );
        if (found !== undefined && !compiled.includes(found)) compiled.push(found);
      }
    }
    return {
      compiled,
      rules: compiled.map(({ rule }) => rule),
      failClosedPath: this.#failsClosed(spellings),
    };
  }
}

function matches(
  candidate: CompiledRule,
  identity: Identity,
  spelling: Spelling,
  upperMethod: string,
): boolean {
  const { rule } = candidate;
  const prefix = spelling.folded ? candidate.foldedPrefix : rule.pathPrefix;
  if (prefix !== undefined && !matchesPrefix(spelling.path, prefix)) return false;
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
