import {
  DEFAULT_ORIGIN_HEADER,
  type Disclosed,
  forbiddenBody,
  rateLimitHeaderFields,
  rateLimitHeaders,
  rateLimitPolicyItem,
  rateLimitPolicyOnly,
  sfString,
  tooManyRequestsBody,
  unavailableBody,
} from "../http/headers.js";
import type { ResolvedPolicy, ResolvedRule } from "../policy/types.js";
import { BlockCache } from "./block-cache.js";
import { withinBudget } from "./deadline.js";
import { GenerationalCache } from "./generational-cache.js";
import {
  type ClientAddress,
  IpResolver,
  JwtVerifier,
  NOT_CACHED,
  type SecretContext,
  userFromTrustedHeader,
  type VerifiedUser,
} from "./identity.js";
import { type Address, CidrSet } from "./ip.js";
import { escapeKeyPart, subjectKey } from "./keys.js";
import { matchesPrefix, normalizePath } from "./path.js";
import type {
  Action,
  CounterSpec,
  CounterState,
  PassVerifier,
  Reason,
  RequestDescription,
  RuleOutcome,
  Store,
  Tier,
  Verdict,
} from "./types.js";

/** Anything that can say whether an address is on a list (static CIDRs, a refreshing source). */
export interface AddressList {
  has(address: Address | undefined): boolean;
}

/** What the limiter consults beside the policy, built from it (see `Limiter.reload`). */
export interface LimiterCompanions {
  readonly passes?: PassVerifier | undefined;
  readonly allowlists?: readonly AddressList[] | undefined;
  readonly denylists?: readonly AddressList[] | undefined;
}

export interface LimiterOptions extends SecretContext {
  readonly policy: ResolvedPolicy;
  readonly store: Store;
  /** Epoch milliseconds; injected so tests and simulations drive time. */
  readonly clock?: () => number;
  /** Extra allow and deny lists consulted after the policy's own (refreshing sources). */
  readonly allowlists?: readonly AddressList[];
  readonly denylists?: readonly AddressList[];
  /** Called once per decision, after the verdict is built (metrics, logs). Must not throw. */
  readonly onDecision?: (verdict: Verdict, request: RequestDescription) => void;
  /** Verifies challenge passes; consulted only when a matched rule challenges. */
  readonly passes?: PassVerifier;
  /**
   * Remember hard blocks locally and answer them without a round trip until they expire
   * (default: on for remote stores, off for the memory store). `maxKeys` bounds its memory.
   */
  readonly blockCache?: false | { readonly maxKeys?: number };
}

interface CompiledRule {
  readonly rule: ResolvedRule;
  /** Position in the policy, indexing per-subject key caches. */
  readonly ordinal: number;
  /** `|namespace|scope`, appended to the subject. */
  readonly keySuffix: string;
  /** Header fragments that do not change per request (months vary: computed then). */
  readonly quotedId: string;
  readonly policyItem: string | undefined;
  readonly methods: ReadonlySet<string> | undefined;
  readonly plans: ReadonlySet<string> | undefined;
}

interface Compiled {
  readonly policy: ResolvedPolicy;
  readonly ip: IpResolver;
  readonly jwt: JwtVerifier | undefined;
  /** Per tier, groups of alternative rules, most specific first. */
  readonly groups: Readonly<Record<Tier, readonly (readonly CompiledRule[])[]>>;
  readonly plans: ReadonlySet<string>;
  readonly allow: CidrSet;
  readonly deny: CidrSet;
  /** RateLimit-Policy fields by set of disclosed rules (see policyFieldOf). */
  readonly policyFields: Map<number, string>;
  /** Counters of recent subjects, by rule ordinal (see usualCounters). */
  readonly counterCache: GenerationalCache<(CounterSpec | undefined)[]>;
  /** Matched rules of recent paths: anonymous, then authenticated by plan (see matchOf). */
  readonly anonymousMatches: GenerationalCache<readonly CompiledRule[]>;
  readonly authenticatedMatches: Map<string, GenerationalCache<readonly CompiledRule[]>>;
  /** Whether a tier has a rule that names methods (the method is then part of the match key). */
  readonly methodsMatter: Readonly<Record<Tier, boolean>>;
}

interface Identity {
  readonly tier: Tier;
  readonly plan: string | undefined;
  readonly ipSubject: string;
  readonly userSubject: string | undefined;
  readonly address: Address | undefined;
  /** Counters of `ipSubject` by rule ordinal; undefined without a known address. */
  readonly ipCounters: (CounterSpec | undefined)[] | undefined;
}

const NO_HEADERS: Record<string, string> = Object.freeze({}) as Record<string, string>;
const NO_OUTCOMES: readonly RuleOutcome[] = Object.freeze([]);
const NO_SHADOWED: readonly string[] = Object.freeze([]);

/**
 * Turns a policy and a store into decisions. `check` takes a plain description of a request
 * and resolves to a verdict; it never throws for a store failure (the rules' fail modes apply)
 * and never waits for a store longer than the policy's time budget.
 */
export class Limiter {
  readonly #store: Store;
  readonly #clock: () => number;
  readonly #options: LimiterOptions;
  #companions: LimiterCompanions;
  readonly #blockCache: BlockCache | undefined;
  #compiled: Compiled;

  constructor(options: LimiterOptions) {
    this.#options = options;
    this.#companions = {
      passes: options.passes,
      allowlists: options.allowlists,
      denylists: options.denylists,
    };
    this.#store = options.store;
    this.#clock = options.clock ?? Date.now;
    this.#compiled = compile(options.policy, options);
    const useCache = options.blockCache ?? (options.store.local ? false : {});
    this.#blockCache = useCache === false ? undefined : new BlockCache(useCache.maxKeys);
  }

  get policy(): ResolvedPolicy {
    return this.#compiled.policy;
  }

  get store(): Store {
    return this.#store;
  }

  /** Round trips the block cache saved since start. */
  get blockCacheHits(): number {
    return this.#blockCache?.hits ?? 0;
  }

  /**
   * Swaps the policy in place. Counters live in the store, so they survive; a policy that does
   * not compile throws and the running one stays.
   */
  reload(policy: ResolvedPolicy, companions?: LimiterCompanions): void {
    this.#compiled = compile(policy, this.#options);
    // The policy's challenge settings and list sources may have changed with it.
    if (companions !== undefined) this.#companions = { ...this.#companions, ...companions };
  }

  /**
   * The subject a request is counted as (`ip:203.0.113.7`, `user:u_abc`), resolved exactly as
   * `check` does. Challenge pages bind their passes to it.
   */
  async subjectOf(request: RequestDescription): Promise<string> {
    return primarySubject(await this.#identify(this.#compiled, request, this.#clock()));
  }

  check(request: RequestDescription): Promise<Verdict> {
    try {
      const verdict = this.decide(request);
      return verdict instanceof Promise ? verdict : Promise.resolve(verdict);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * `check` without the promise when nothing has to wait: a cached (or absent) identity and
   * the in-process store give the verdict synchronously. Callers on a hot path (the gateway)
   * use it to skip a microtask turn per request; it may still return a promise.
   */
  decide(request: RequestDescription): Verdict | Promise<Verdict> {
    const started = this.#clock();
    const compiled = this.#compiled;
    const path = normalizePath(request.path);
    const found = this.#identify(compiled, request, started);
    if (found instanceof Promise) {
      return found.then((identity) => this.#decideFor(compiled, request, identity, path, started));
    }
    return this.#decideFor(compiled, request, found, path, started);
  }

  #decideFor(
    compiled: Compiled,
    request: RequestDescription,
    identity: Identity,
    path: string,
    started: number,
  ): Verdict | Promise<Verdict> {
    if (this.#listed(compiled.deny, this.#companions.denylists, identity.address)) {
      return this.#finish(
        request,
        makeVerdict(identity, path, {
          action: "block",
          reason: "denylisted",
          status: 403,
          headers: {
            "cache-control": "no-store",
            "content-type": "application/json; charset=utf-8",
          },
          body: forbiddenBody(),
        }),
      );
    }
    if (this.#listed(compiled.allow, this.#companions.allowlists, identity.address)) {
      return this.#finish(
        request,
        makeVerdict(identity, path, { action: "allow", reason: "allowlisted" }),
      );
    }

    const rules = matchOf(compiled, identity, path, request.method ?? "GET");
    if (rules.length === 0) {
      return this.#finish(
        request,
        makeVerdict(identity, path, { action: "allow", reason: "no-rule" }),
      );
    }

    const passes = this.#companions.passes;
    if (request.passVerified !== true && passes !== undefined && anyChallenges(rules)) {
      const verified = passes.verify(request, primarySubject(identity), started);
      if (verified instanceof Promise) {
        return verified.then((valid) =>
          this.#count(compiled, request, identity, path, rules, valid, started),
        );
      }
      return this.#count(compiled, request, identity, path, rules, verified, started);
    }
    return this.#count(
      compiled,
      request,
      identity,
      path,
      rules,
      request.passVerified === true,
      started,
    );
  }

  #count(
    compiled: Compiled,
    request: RequestDescription,
    identity: Identity,
    path: string,
    rules: readonly CompiledRule[],
    passVerified: boolean,
    started: number,
  ): Verdict | Promise<Verdict> {
    const counters: CounterSpec[] = new Array(rules.length);
    for (let i = 0; i < rules.length; i++) {
      counters[i] = toCounter(
        compiled,
        rules[i] as CompiledRule,
        identity,
        request.cost,
        passVerified,
      );
    }

    const cachedUntil = this.#blockCache?.blockedUntil(counters, started);
    if (cachedUntil !== undefined) {
      return this.#finish(
        request,
        this.#cachedBlock(compiled, identity, path, rules, counters, cachedUntil, started),
      );
    }

    const applySync = this.#store.applySync;
    if (applySync !== undefined) {
      // The in-process store answers at once: no promise, no timer, no closure.
      let states: CounterState[];
      try {
        states = applySync.call(this.#store, counters, started);
      } catch {
        return this.#finish(request, this.#failed(compiled, identity, path, rules, started));
      }
      return this.#conclude(
        compiled,
        identity,
        path,
        request,
        passVerified,
        rules,
        counters,
        states,
        started,
      );
    }
    return this.#apply(compiled, counters, started).then(
      (states) =>
        this.#conclude(
          compiled,
          identity,
          path,
          request,
          passVerified,
          rules,
          counters,
          states,
          started,
        ),
      () => this.#finish(request, this.#failed(compiled, identity, path, rules, started)),
    );
  }

  /** The verdict for the counters' states, reported to the observer. */
  #conclude(
    compiled: Compiled,
    identity: Identity,
    path: string,
    request: RequestDescription,
    passVerified: boolean,
    rules: readonly CompiledRule[],
    counters: CounterSpec[],
    states: CounterState[],
    now: number,
  ): Verdict {
    return this.#finish(
      request,
      this.#decide(compiled, identity, path, request, passVerified, rules, counters, states, now),
    );
  }

  /** Synchronous unless a token must be verified for the first time. */
  #identify(
    compiled: Compiled,
    request: RequestDescription,
    now: number,
  ): Identity | Promise<Identity> {
    const client = compiled.ip.resolve(request);
    const jwt = compiled.jwt;
    if (jwt !== undefined) {
      const token = jwt.token(request);
      if (token !== undefined) {
        const known = jwt.cached(token, now);
        if (known === NOT_CACHED) {
          return jwt.verify(token, now).then((user) => identityOf(compiled, request, client, user));
        }
        return identityOf(compiled, request, client, known);
      }
    }
    return identityOf(compiled, request, client, undefined);
  }
  #listed(
    own: CidrSet,
    extra: readonly AddressList[] | undefined,
    address: Address | undefined,
  ): boolean {
    if (address === undefined) return false;
    if (own.size > 0 && own.has(address)) return true;
    if (extra === undefined) return false;
    for (const list of extra) if (list.has(address)) return true;
    return false;
  }

  #apply(compiled: Compiled, counters: CounterSpec[], now: number): Promise<CounterState[]> {
    const store = this.#store;
    if (store.applySync !== undefined) {
      return Promise.resolve(store.applySync(counters, now));
    }
    const { budgetMs, connectBudgetMs } = compiled.policy;
    return withinBudget(
      (progress) => store.apply(counters, now, progress),
      { budgetMs, connectBudgetMs, expectedRoundTripMs: store.expectedRoundTripMs ?? 0 },
      store.name,
    );
  }

  #decide(
    compiled: Compiled,
    identity: Identity,
    path: string,
    request: RequestDescription,
    passVerified: boolean,
    rules: readonly CompiledRule[],
    counters: CounterSpec[],
    states: CounterState[],
    now: number,
  ): Verdict {
    const policy = compiled.policy;
    const count = rules.length;
    const outcomes: RuleOutcome[] = new Array(count);
    let shadowed: string[] | undefined;
    // Indexes into `rules`: the refusing rule (longest wait), and the most restrictive disclosed
    // rule whose count is known, which decides what an admitted client is told.
    let refusing = -1;
    let refusingRetryMs = 0;
    let deciding = -1;
    let disclosedCount = 0;
    let challenged = false;
    let hardBlock = false;

    for (let i = 0; i < count; i++) {
      const { rule } = rules[i] as CompiledRule;
      const counter = counters[i] as CounterSpec;
      const state = states[i] as CounterState;
      outcomes[i] = {
        ruleId: rule.id,
        namespace: rule.namespace,
        key: counter.key,
        limit: rule.limit,
        state,
        shadow: rule.shadow,
      };
      if (rule.shadow) {
        if (!state.allowed) {
          shadowed ??= [];
          shadowed.push(rule.id);
        }
        continue;
      }
      if (rule.disclose) {
        disclosedCount++;
        if (
          state.approximate !== true &&
          (deciding === -1 || state.remaining < (states[deciding] as CounterState).remaining)
        ) {
          deciding = i;
        }
      }
      if (state.allowed) continue;

      // Refused by this rule: inside the challenge band, or a hard block.
      const inBand =
        rule.action === "challenge" &&
        !passVerified &&
        state.count < rule.limit * rule.challengeBand;
      if (inBand) {
        challenged = true;
      } else {
        hardBlock = true;
        this.#blockCache?.remember(counter, rule, state, now);
      }
      if (refusing === -1 || state.retryAfterMs > refusingRetryMs) {
        refusing = i;
        refusingRetryMs = state.retryAfterMs;
      }
    }

    if (refusing === -1) {
      let headers = NO_HEADERS;
      let originHeaders = NO_HEADERS;
      let decidingRule: ResolvedRule | undefined;
      let decidingState: CounterState | undefined;
      if (deciding !== -1) {
        const compiledRule = rules[deciding] as CompiledRule;
        decidingRule = compiledRule.rule;
        decidingState = states[deciding] as CounterState;
        headers = rateLimitHeaderFields(
          policy,
          decidingRule,
          decidingState,
          compiledRule.quotedId,
          policy.headers.draft ? policyFieldOf(compiled, rules, now) : "",
          now,
        );
        // The policy's origin header name is lower case (resolve.ts), as the gateway expects.
        // The usual name as a literal: an object of one fixed shape, no keyed store.
        const remaining = String(decidingState.remaining);
        originHeaders =
          policy.headers.origin === DEFAULT_ORIGIN_HEADER
            ? { "x-ratelimit-remaining": remaining }
            : { [policy.headers.origin]: remaining };
      } else if (disclosedCount > 0) {
        // Only approximate rules matched: the quotas can be told, the counts cannot.
        headers = {};
        rateLimitPolicyOnly(headers, policy, disclosedOf(rules, outcomes), now);
      }
      return makeVerdict(identity, path, {
        action: "allow",
        reason: "within-limit",
        headers,
        originHeaders,
        limit: decidingRule?.limit,
        remaining: decidingState?.remaining,
        reset: decidingState === undefined ? 0 : Math.ceil(decidingState.resetAt / 1000),
        rule: decidingRule?.id,
        outcomes,
        shadowed,
        durationMs: this.#clock() - now,
      });
    }

    const disclosed = disclosedOf(rules, outcomes);
    const refusingRule = rules[refusing] as CompiledRule;
    const { rule } = refusingRule;
    const outcome = outcomes[refusing] as RuleOutcome;
    const retryAfterSeconds = Math.max(1, Math.ceil(refusingRetryMs / 1000));
    const action: Action = hardBlock || !challenged ? "block" : "challenge";
    const headers: Record<string, string> = { "cache-control": "no-store" };
    if (rule.disclose) {
      rateLimitHeaders(
        headers,
        policy,
        { rule, outcome, quotedId: refusingRule.quotedId },
        disclosed,
        now,
      );
    }
    let location: string | undefined;
    let status = 429;
    let body: string | undefined;
    if (action === "challenge") {
      status = 302;
      location = challengeLocation(policy.challenge.path, path, request.path);
      headers.location = location;
    } else {
      headers["retry-after"] = String(retryAfterSeconds);
      headers["content-type"] = "application/json; charset=utf-8";
      body = tooManyRequestsBody(retryAfterSeconds);
    }
    return makeVerdict(identity, path, {
      action,
      reason: action === "challenge" ? "challenge-band" : "over-limit",
      status,
      headers,
      body,
      limit: rule.limit,
      remaining: outcome.state.remaining,
      reset: Math.ceil(outcome.state.resetAt / 1000),
      retryAfterSeconds,
      rule: rule.id,
      outcomes,
      shadowed,
      location,
      durationMs: this.#clock() - now,
    });
  }

  #cachedBlock(
    compiled: Compiled,
    identity: Identity,
    path: string,
    rules: readonly CompiledRule[],
    counters: CounterSpec[],
    until: { key: string; until: number },
    now: number,
  ): Verdict {
    const index = counters.findIndex((counter) => counter.key === until.key);
    const rule = (rules[index] as CompiledRule).rule;
    const retryAfterMs = until.until - now;
    const retryAfterSeconds = Math.max(1, Math.ceil(retryAfterMs / 1000));
    const state: CounterState = {
      allowed: false,
      count: rule.limit,
      remaining: 0,
      resetAt: until.until,
      retryAfterMs,
    };
    const outcome: RuleOutcome = {
      ruleId: rule.id,
      namespace: rule.namespace,
      key: until.key,
      limit: rule.limit,
      state,
      shadow: false,
    };
    const headers: Record<string, string> = {
      "cache-control": "no-store",
      "retry-after": String(retryAfterSeconds),
      "content-type": "application/json; charset=utf-8",
    };
    if (rule.disclose) {
      rateLimitHeaders(headers, compiled.policy, { rule, outcome }, [{ rule, outcome }], now);
    }
    return makeVerdict(identity, path, {
      action: "block",
      reason: "blocked-cached",
      status: 429,
      headers,
      body: tooManyRequestsBody(retryAfterSeconds),
      limit: rule.limit,
      remaining: 0,
      reset: Math.ceil(until.until / 1000),
      retryAfterSeconds,
      rule: rule.id,
      outcomes: [outcome],
      durationMs: this.#clock() - now,
    });
  }

  #failed(
    compiled: Compiled,
    identity: Identity,
    path: string,
    rules: readonly CompiledRule[],
    now: number,
  ): Verdict {
    const policy = compiled.policy;
    const closedRule = rules.find(({ rule }) => !rule.shadow && rule.failMode === "closed");
    const closedPath = policy.failClosedPaths.some((prefix) => matchesPrefix(path, prefix));
    if (closedRule === undefined && !closedPath) {
      return makeVerdict(identity, path, {
        action: "allow",
        reason: "store-failed-open",
        rule: rules[0]?.rule.id,
        durationMs: this.#clock() - now,
      });
    }
    const retryAfterSeconds = policy.unavailableRetryAfterSeconds;
    return makeVerdict(identity, path, {
      action: "unavailable",
      reason: "store-failed-closed",
      status: 503,
      headers: {
        "cache-control": "no-store",
        "retry-after": String(retryAfterSeconds),
        "content-type": "application/json; charset=utf-8",
      },
      body: unavailableBody(retryAfterSeconds),
      retryAfterSeconds,
      rule: (closedRule ?? rules[0])?.rule.id,
      durationMs: this.#clock() - now,
    });
  }

  #finish(request: RequestDescription, verdict: Verdict): Verdict {
    const onDecision = this.#options.onDecision;
    if (onDecision !== undefined) {
      try {
        onDecision(verdict, request);
      } catch {
        // Observers must never change a decision.
      }
    }
    return verdict;
  }
}

/** The identity of a request once its user (if any) is known. */
function identityOf(
  compiled: Compiled,
  request: RequestDescription,
  client: ClientAddress,
  verified: VerifiedUser | undefined,
): Identity {
  let user = verified;
  const trustedHeader = compiled.policy.identity.trustedHeader;
  if (user === undefined && trustedHeader !== undefined) {
    user = userFromTrustedHeader(trustedHeader, request, client.peerTrusted);
  }
  const ipSubject = client.subjectKey;
  const ipCounters =
    client.address === undefined ? undefined : (client.memo as (CounterSpec | undefined)[]);
  if (user === undefined) {
    return {
      tier: "anonymous",
      plan: undefined,
      ipSubject,
      userSubject: undefined,
      address: client.address,
      ipCounters,
    };
  }
  let plan = user.plan;
  if (plan !== undefined && !compiled.plans.has(plan)) plan = compiled.policy.plans.default;
  return {
    tier: "authenticated",
    plan,
    ipSubject,
    userSubject: subjectKey("user", user.id),
    address: client.address,
    ipCounters,
  };
}

/** Paths per match-cache generation, and the longest path kept (longer ones are matched anew). */
const CACHED_PATHS_PER_GENERATION = 1024;
const MAX_CACHED_PATH_LENGTH = 256;

/**
 * The rules a request matches, one per group. They depend on the tier, the plan, the path and,
 * when a rule names methods, the method, and the same paths come back: recent paths' rules are
 * kept (bounded, and never for a path too long to be worth holding), so a request usually costs
 * one lookup instead of a prefix comparison per rule. The array is shared: never mutated.
 */
function matchOf(
  compiled: Compiled,
  identity: Identity,
  path: string,
  method: string,
): readonly CompiledRule[] {
  if (path.length > MAX_CACHED_PATH_LENGTH) return matchRules(compiled, identity, path, method);
  const tier = identity.tier;
  let cache = compiled.anonymousMatches;
  if (tier !== "anonymous") {
    const plan = identity.plan ?? "";
    const byPlan = compiled.authenticatedMatches.get(plan);
    if (byPlan === undefined) {
      cache = new GenerationalCache(CACHED_PATHS_PER_GENERATION);
      compiled.authenticatedMatches.set(plan, cache);
    } else {
      cache = byPlan;
    }
  }
  const key = compiled.methodsMatter[tier] ? `${method.toUpperCase()} ${path}` : path;
  let rules = cache.get(key);
  if (rules === undefined) {
    rules = matchRules(compiled, identity, path, method);
    cache.set(key, rules);
  }
  return rules;
}

function matchRules(
  compiled: Compiled,
  identity: Identity,
  path: string,
  method: string,
): CompiledRule[] {
  const groups = compiled.groups[identity.tier];
  // At most one rule per group: sized once, trimmed at the end.
  const chosen: CompiledRule[] = new Array(groups.length);
  let found = 0;
  // Upper-cased only for a rule that names methods (most do not).
  let upperMethod: string | undefined;
  for (const group of groups) {
    for (const candidate of group) {
      const { rule } = candidate;
      if (rule.pathPrefix !== undefined && !matchesPrefix(path, rule.pathPrefix)) continue;
      if (candidate.methods !== undefined) {
        upperMethod ??= method.toUpperCase();
        if (!candidate.methods.has(upperMethod)) continue;
      }
      if (candidate.plans !== undefined) {
        if (identity.plan === undefined || !candidate.plans.has(identity.plan)) continue;
      }
      if (rule.key === "user" && identity.userSubject === undefined) continue;
      chosen[found++] = candidate;
      break;
    }
  }
  // Setting `length` goes through a runtime call in V8: only when a group matched nothing.
  if (found !== chosen.length) chosen.length = found;
  return chosen;
}

function anyChallenges(rules: readonly CompiledRule[]): boolean {
  for (const { rule } of rules) if (rule.action === "challenge") return true;
  return false;
}

function primarySubject(identity: Identity): string {
  return identity.userSubject ?? identity.ipSubject;
}

function toCounter(
  compiled: Compiled,
  compiledRule: CompiledRule,
  identity: Identity,
  requestCost: number | undefined,
  passVerified: boolean,
): CounterSpec {
  const { rule } = compiledRule;
  const subject =
    rule.key === "ip" ? identity.ipSubject : (identity.userSubject ?? identity.ipSubject);
  // The address's own cache slots when the subject is the address: no lookup by subject.
  const slots =
    subject === identity.ipSubject && identity.ipCounters !== undefined
      ? identity.ipCounters
      : usualCounters(compiled, subject);
  let usual = slots[compiledRule.ordinal];
  if (usual === undefined) {
    usual = {
      key: subject + compiledRule.keySuffix,
      subject,
      algorithm: rule.algorithm,
      limit: rule.limit,
      window: rule.window,
      cost: rule.cost,
      mode: rule.shadow ? "observe" : "enforce",
      ruleId: rule.id,
      namespace: rule.namespace,
      backend: rule.backend,
      storeHandle: null,
    };
    slots[compiledRule.ordinal] = usual;
  }
  const threshold =
    passVerified && rule.action === "challenge"
      ? Math.floor(rule.limit * rule.challengeBand)
      : rule.limit;
  const cost = requestCost ?? rule.cost;
  if (threshold === usual.limit && cost === usual.cost) return usual;
  // A pass holder's threshold, or a request's own cost: this request's counter differs.
  return {
    key: usual.key,
    subject,
    algorithm: usual.algorithm,
    limit: threshold,
    window: usual.window,
    cost,
    mode: usual.mode,
    ruleId: usual.ruleId,
    namespace: usual.namespace,
    backend: usual.backend,
    storeHandle: usual.storeHandle,
  };
}

/** Subjects per counter-cache generation (at most twice this many held; see GenerationalCache). */
const CACHED_SUBJECTS_PER_GENERATION = 16_384;

/**
 * The usual counters (the rule's own threshold and cost) of a subject, by rule ordinal. Those of
 * recent subjects are kept (bounded): a returning client's counters are the same objects, with
 * the same key strings, so the store's hash lookups reuse their cached hashes and no counter is
 * built per request.
 */
function usualCounters(compiled: Compiled, subject: string): (CounterSpec | undefined)[] {
  const cache = compiled.counterCache;
  let counters = cache.get(subject);
  if (counters === undefined) {
    counters = new Array(compiled.policy.rules.length);
    cache.set(subject, counters);
  }
  return counters;
}

/** Distinct disclosed-rule sets whose RateLimit-Policy field is kept (see policyFieldOf). */
const MAX_POLICY_FIELDS = 256;

/**
 * `RateLimit-Policy` for the disclosed rules among `rules`. The same rules make the same field,
 * so for rules of fixed length it is built once per set (keyed by a bit per rule ordinal) and
 * the same string is sent again: no concatenation per request.
 */
function policyFieldOf(compiled: Compiled, rules: readonly CompiledRule[], now: number): string {
  let set = 0;
  let reusable = true;
  for (const compiledRule of rules) {
    if (compiledRule.rule.shadow || !compiledRule.rule.disclose) continue;
    if (compiledRule.policyItem === undefined || compiledRule.ordinal > 30) reusable = false;
    else set |= 1 << compiledRule.ordinal;
  }
  if (reusable) {
    const known = compiled.policyFields.get(set);
    if (known !== undefined) return known;
  }
  let field = "";
  for (const compiledRule of rules) {
    if (compiledRule.rule.shadow || !compiledRule.rule.disclose) continue;
    const item = compiledRule.policyItem ?? rateLimitPolicyItem(compiledRule.rule, now);
    field = field === "" ? item : `${field}, ${item}`;
  }
  if (reusable && compiled.policyFields.size < MAX_POLICY_FIELDS) {
    compiled.policyFields.set(set, field);
  }
  return field;
}

/** The disclosed, enforcing rules with their outcomes, as the header builders take them. */
function disclosedOf(
  rules: readonly CompiledRule[],
  outcomes: readonly RuleOutcome[],
): Disclosed[] {
  const disclosed: Disclosed[] = [];
  for (let i = 0; i < rules.length; i++) {
    const compiledRule = rules[i] as CompiledRule;
    if (compiledRule.rule.shadow || !compiledRule.rule.disclose) continue;
    disclosed.push({
      rule: compiledRule.rule,
      outcome: outcomes[i] as RuleOutcome,
      policyItem: compiledRule.policyItem,
      quotedId: compiledRule.quotedId,
    });
  }
  return disclosed;
}

/** The parts of a verdict that a decision sets; the rest comes from the identity. */
interface Decision {
  readonly action: Action;
  readonly reason: Reason;
  readonly status?: number;
  readonly headers?: Record<string, string>;
  readonly originHeaders?: Record<string, string>;
  readonly body?: string;
  readonly limit?: number;
  readonly remaining?: number;
  readonly reset?: number;
  readonly retryAfterSeconds?: number;
  readonly rule?: string;
  readonly outcomes?: readonly RuleOutcome[];
  readonly shadowed?: readonly string[];
  readonly location?: string;
  readonly durationMs?: number;
}

/**
 * Builds every verdict with the same shape, field by field: an object spread here costs more
 * than the rest of a decision on the memory store.
 */
function makeVerdict(identity: Identity, path: string, decision: Decision): Verdict {
  return {
    action: decision.action,
    reason: decision.reason,
    status: decision.status ?? 200,
    headers: decision.headers ?? NO_HEADERS,
    originHeaders: decision.originHeaders ?? NO_HEADERS,
    body: decision.body,
    limit: decision.limit ?? 0,
    remaining: decision.remaining ?? 0,
    reset: decision.reset ?? 0,
    retryAfterSeconds: decision.retryAfterSeconds ?? 0,
    rule: decision.rule,
    tier: identity.tier,
    plan: identity.plan,
    subject: primarySubject(identity),
    path,
    outcomes: decision.outcomes ?? NO_OUTCOMES,
    shadowed: decision.shadowed ?? NO_SHADOWED,
    location: decision.location,
    durationMs: decision.durationMs ?? 0,
  };
}

/**
 * The challenge page URL. The redirect target is the normalised path (never `//host`, so never
 * another origin) plus the original query string.
 */
export function challengeLocation(challengePath: string, path: string, rawPath: string): string {
  const queryAt = rawPath.indexOf("?");
  const query = queryAt === -1 ? "" : rawPath.slice(queryAt).split("#")[0];
  return `${challengePath}?redirect=${encodeURIComponent(path + (query ?? ""))}`;
}

function compile(policy: ResolvedPolicy, context: SecretContext): Compiled {
  const byGroup = new Map<string, CompiledRule[]>();
  let ordinal = 0;
  for (const rule of policy.rules) {
    const compiledRule: CompiledRule = {
      rule,
      ordinal: ordinal++,
      keySuffix: `|${escapeKeyPart(rule.namespace)}|${escapeKeyPart(rule.scope)}`,
      quotedId: sfString(rule.id),
      policyItem: "ms" in rule.window ? rateLimitPolicyItem(rule, 0) : undefined,
      methods: rule.methods === undefined ? undefined : new Set(rule.methods),
      plans: rule.plans === undefined ? undefined : new Set(rule.plans),
    };
    const group = byGroup.get(rule.group);
    if (group === undefined) byGroup.set(rule.group, [compiledRule]);
    else group.push(compiledRule);
  }
  const groups: Record<Tier, CompiledRule[][]> = { anonymous: [], authenticated: [] };
  for (const members of byGroup.values()) {
    members.sort((a, b) => specificity(b.rule) - specificity(a.rule));
    for (const tier of ["anonymous", "authenticated"] as const) {
      const forTier = members.filter(({ rule }) => rule.tiers.includes(tier));
      if (forTier.length > 0) groups[tier].push(forTier);
    }
  }
  const jwtConfig = policy.identity.jwt;
  return {
    policy,
    ip: new IpResolver(policy.identity.ip),
    jwt: jwtConfig === undefined ? undefined : new JwtVerifier(jwtConfig, context),
    groups,
    plans: new Set(policy.plans.names),
    allow: new CidrSet(policy.allowlist),
    deny: new CidrSet(policy.denylist),
    counterCache: new GenerationalCache(CACHED_SUBJECTS_PER_GENERATION),
    policyFields: new Map(),
    anonymousMatches: new GenerationalCache(CACHED_PATHS_PER_GENERATION),
    authenticatedMatches: new Map(),
    methodsMatter: {
      anonymous: groups.anonymous.some((group) => group.some((rule) => rule.methods !== undefined)),
      authenticated: groups.authenticated.some((group) =>
        group.some((rule) => rule.methods !== undefined),
      ),
    },
  };
}

/** More specific rules win within a group: plan-specific first, then the longest path. */
function specificity(rule: ResolvedRule): number {
  return (
    (rule.plans === undefined ? 0 : 1_000_000) +
    (rule.methods === undefined ? 0 : 100_000) +
    (rule.pathPrefix?.length ?? 0)
  );
}

export function createLimiter(options: LimiterOptions): Limiter {
  return new Limiter(options);
}
