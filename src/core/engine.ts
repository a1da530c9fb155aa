/**
 * The decision engine: a request description in, a `Decision` out. This file only orchestrates;
 * each step lives in a file named for it (identify, match, counters, deadline, outcome).
 */
import { BlockCache } from "./block-cache.js";
import { checkCost } from "./cost.js";
import { CounterBuilder } from "./counters.js";
import { type BudgetTimes, REAL_SCHEDULER, type Scheduler, withinBudget } from "./deadline.js";
import type { Decision } from "./decision.js";
import { EdgelimitError } from "./errors.js";
import { Identifier, type Identity, primarySubject, type TokenVerifier } from "./identify.js";
import { type Address, CidrSet } from "./ip.js";
import { type LocalCountingStatus, LocalFallback, stillAnswering } from "./local-fallback.js";
import { type CompiledRule, type Match, RuleMatcher } from "./match.js";
import type { ResolvedPolicy, ResolvedRule } from "./model.js";
import { type CountedDecision, cachedBlock, decideFromCounts } from "./outcome.js";
import { normalizePath } from "./path.js";
import { type Peek, peekRequest } from "./peek.js";
import type {
  ChallengeClient,
  CounterSpec,
  CounterState,
  PassVerifier,
  RequestDescription,
  ResetFollower,
  RuleOutcome,
  Store,
  StoreTraits,
} from "./types.js";

/** Anything that can say whether an address is on a list (static CIDRs, a refreshing source). */
export interface AddressList {
  has(address: Address | undefined): boolean;
}

/** What the engine consults beside the policy, built from it (see `reload`). */
export interface EngineCompanions {
  readonly passes?: PassVerifier | undefined;
  readonly allowlists?: readonly AddressList[] | undefined;
  readonly denylists?: readonly AddressList[] | undefined;
}

export interface EngineOptions extends EngineCompanions {
  readonly policy: ResolvedPolicy;
  readonly store: Store;
  /** Verifies the policy's tokens; required when the policy authenticates users by token. */
  readonly tokens?: TokenVerifier | undefined;
  /** Epoch milliseconds; injected so tests and simulations drive time. */
  readonly clock?: () => number;
  /**
   * The monotonic clock and timers the decision budget runs on (default: the runtime's). The
   * simulator injects virtual ones, with `clock` on the same virtual time.
   */
  readonly scheduler?: Scheduler | undefined;
  /**
   * Called with the cause each time the store fails a decision (an error, a missed budget, an
   * open circuit breaker), before the rule's fail mode applies. Must not throw.
   */
  readonly onStoreError?: ((error: unknown, request: RequestDescription) => void) | undefined;
  /**
   * Remember hard blocks locally and answer them without a round trip until they expire
   * (default: on for remote stores, off for the memory store). `maxKeys` bounds its memory.
   */
  readonly blockCache?: false | { readonly maxKeys?: number } | undefined;
  /** Bounds the counters a `failMode: local` rule holds while the store is failed (local-fallback.ts). */
  readonly localFallback?: { readonly maxKeys?: number } | undefined;
}

/** One request on its way through `decide`: what every step after identity needs. */
interface Attempt {
  readonly prepared: Prepared;
  readonly request: RequestDescription;
  readonly identity: Identity;
  /** The normalised path. */
  readonly path: string;
  /** When the decision began (its duration is measured from here). */
  readonly started: number;
  /** Whether it waited for a token or pass check: it is then counted at a fresh reading. */
  readonly waited: boolean;
}

/** One policy, ready to decide with. */
interface Prepared {
  readonly policy: ResolvedPolicy;
  readonly identifier: Identifier;
  readonly matcher: RuleMatcher;
  readonly counters: CounterBuilder;
  readonly allow: CidrSet;
  readonly deny: CidrSet;
}

const NO_OUTCOMES: readonly RuleOutcome[] = Object.freeze([]);
const NO_NAMES: readonly string[] = Object.freeze([]);
const NO_RULES: readonly ResolvedRule[] = Object.freeze([]);

/**
 * Decides requests for a policy against a store. `decide` never throws for a store failure
 * (the rules' fail modes apply) and never waits for a store longer than the policy's budget
 * (see `deadline.ts` for what the budget measures).
 */
export class DecisionEngine {
  readonly store: Store;
  /** The store's answer in this process, when it lives here (`StoreTraits.applySync`). */
  readonly #applySync: StoreTraits["applySync"];
  readonly #roundTripMs: StoreTraits["roundTripMs"];
  readonly #clock: () => number;
  readonly #scheduler: Scheduler;
  readonly #blockCache: BlockCache | undefined;
  /** Where the store keeps a log of resets: hears of other processes' (reset-watch.ts). */
  readonly #resetWatch: ResetFollower | undefined;
  readonly #local: LocalFallback;
  readonly #onStoreError: EngineOptions["onStoreError"];
  #companions: EngineCompanions;
  #prepared: Prepared;

  constructor(options: EngineOptions) {
    const store = options.store;
    this.store = store;
    this.#applySync = store.traits?.applySync;
    this.#roundTripMs = store.traits?.roundTripMs;
    this.#clock = options.clock ?? Date.now;
    this.#scheduler = options.scheduler ?? REAL_SCHEDULER;
    this.#companions = options;
    this.#onStoreError = options.onStoreError;
    checkHybridStore(options.policy, store);
    this.#prepared = prepare(options.policy, options.tokens);
    const cache = options.blockCache ?? (this.#applySync !== undefined ? false : {});
    this.#blockCache = cache === false ? undefined : new BlockCache(cache.maxKeys);
    if (this.#blockCache !== undefined) {
      this.#resetWatch = store.followResets?.(this.#blockCache, this.#scheduler);
    }
    this.#local = new LocalFallback(options.localFallback);
  }

  /** What `failMode: local` rules counted in this process while the store was failed. */
  get localCounting(): LocalCountingStatus {
    return this.#local.status;
  }

  get policy(): ResolvedPolicy {
    return this.#prepared.policy;
  }

  /** Round trips the block cache saved since start. */
  get blockCacheHits(): number {
    return this.#blockCache?.hits ?? 0;
  }

  /** Swaps the policy; counters live in the store, so they survive. Throws if it cannot. */
  reload(
    policy: ResolvedPolicy,
    tokens: TokenVerifier | undefined,
    companions?: EngineCompanions,
  ): void {
    checkHybridStore(policy, this.store);
    this.#prepared = prepare(policy, tokens);
    this.#blockCache?.clear();
    if (companions !== undefined) this.#companions = { ...this.#companions, ...companions };
  }

  /** The subject a request is counted as, resolved exactly as `decide` does. */
  async subjectOf(request: RequestDescription): Promise<string> {
    return (await this.clientOf(request)).subject;
  }

  /** The client as `decide` sees it: its trusted address and the subject it is counted as. */
  async clientOf(request: RequestDescription): Promise<ChallengeClient> {
    const identity = await this.#prepared.identifier.identify(request, this.#clock());
    return { ip: identity.address?.toString(), subject: primarySubject(identity) };
  }

  /** What `decide` would report for each rule `request` matches, counting nothing (peek.ts). */
  peek(request: RequestDescription): Promise<Peek> {
    const prepared = this.#prepared;
    const companions = this.#companions;
    return peekRequest(request, {
      ...prepared,
      store: this.store,
      applySync: this.#applySync,
      clock: this.#clock,
      scheduler: this.#scheduler,
      budget: (counters) => this.#budgetOf(prepared.policy, counters),
      listedAs: (address) =>
        listed(prepared.deny, companions.denylists, address)
          ? "denylisted"
          : listed(prepared.allow, companions.allowlists, address)
            ? "allowlisted"
            : undefined,
      passes: companions.passes,
      local: this.#local,
    });
  }

  /**
   * Forgets the counters `request` would touch (all its matched rules, or those named in
   * `ruleIds`), in the store and in the block cache: after a login succeeds, its failures no
   * longer count. Resolves to the rules reset.
   */
  async reset(request: RequestDescription, ruleIds?: readonly string[]): Promise<string[]> {
    const reset = this.store.reset;
    if (reset === undefined) {
      throw new EdgelimitError(
        "EL_NO_RESET",
        `the ${this.store.name} store cannot reset counters; use the memory or Redis store for limiter.reset`,
      );
    }
    const prepared = this.#prepared;
    const identity = await prepared.identifier.identify(request, this.#clock());
    const path = normalizePath(request.path);
    const match = prepared.matcher.match(identity, path, request);
    const chosen = match.compiled.filter(
      ({ rule }) => ruleIds === undefined || ruleIds.includes(rule.id),
    );
    const counters = prepared.counters.countersFor(chosen, identity, undefined, false);
    await reset.call(this.store, counters, this.#clock());
    for (const counter of counters) this.#blockCache?.forget(counter.key);
    return chosen.map(({ rule }) => rule.id);
  }

  /**
   * Synchronous when nothing has to wait (a known identity, an in-process store). Throws an
   * `EdgelimitError` for a request that cannot be counted (a bad cost or application user).
   */
  decide(request: RequestDescription): Decision | Promise<Decision> {
    checkCost(request.cost);
    const started = this.#clock();
    const prepared = this.#prepared;
    const path = normalizePath(request.path);
    const identity = prepared.identifier.identify(request, started);
    if (identity instanceof Promise) {
      return identity.then((known) =>
        this.#decideFor({ prepared, request, identity: known, path, started, waited: true }),
      );
    }
    return this.#decideFor({ prepared, request, identity, path, started, waited: false });
  }

  #decideFor(attempt: Attempt): Decision | Promise<Decision> {
    const { prepared, request, identity } = attempt;
    const { address } = identity;
    if (listed(prepared.deny, this.#companions.denylists, address)) {
      return this.#finish(attempt, NO_RULES, unlisted("block", "denylisted"));
    }
    if (listed(prepared.allow, this.#companions.allowlists, address)) {
      return this.#finish(attempt, NO_RULES, unlisted("allow", "allowlisted"));
    }
    const match = prepared.matcher.match(identity, attempt.path, request);
    if (match.compiled.length === 0) {
      return this.#finish(attempt, NO_RULES, unlisted("allow", "no-rule"));
    }
    // A challenge pass is checked only when a matched rule challenges.
    const passes = this.#companions.passes;
    if (request.passVerified === true || passes === undefined || !anyChallenges(match)) {
      return this.#count(attempt, match, request.passVerified);
    }
    const verified = passes.verify(request, primarySubject(identity), attempt.started);
    if (verified instanceof Promise) {
      return verified.then((valid) => this.#count({ ...attempt, waited: true }, match, valid));
    }
    return this.#count(attempt, match, verified);
  }

  #count(
    attempt: Attempt,
    match: Match,
    passVerified: boolean | undefined,
  ): Decision | Promise<Decision> {
    const verified = passVerified === true;
    const { prepared, request, identity } = attempt;
    const counters = prepared.counters.countersFor(
      match.compiled,
      identity,
      request.cost,
      verified,
    );
    // Counted at the time it reaches the store, not when it started: a token or pass check may
    // have taken a while (a late request costs the counter's newest window, see countedAt).
    const now = attempt.waited ? this.#clock() : attempt.started;
    return this.#applyCounters(attempt, now, match, counters, verified);
  }

  /**
   * Decides for counters its caller matched itself rather than for a request: the rate limit
   * service (src/rls/) matches Envoy's descriptors against its own configuration, then the
   * counters go to the store exactly as `decide`'s do, in one call under the policy's budget,
   * with the block cache and the rules' fail modes. `rules[i]` is the rule `counters[i]`
   * counts for; `subject` and `path` are what the decision reports.
   */
  decideCounters(
    rules: readonly ResolvedRule[],
    counters: readonly CounterSpec[],
    subject: string,
    path: string,
  ): Decision | Promise<Decision> {
    // A cost of 0 checks without counting (Envoy's `hits_addend: 0`).
    for (const counter of counters) checkCost(counter.cost, "a counter's cost", 0);
    const started = this.#clock();
    const identity: Identity = {
      tier: "anonymous",
      plan: undefined,
      ipSubject: subject,
      userSubject: undefined,
      address: undefined,
    };
    const match: Match = {
      compiled: rules.map((rule) => ({
        rule,
        ordinal: -1,
        keySuffix: "",
        foldedPrefix: undefined,
        methods: undefined,
        plans: undefined,
      })),
      rules,
      // `path` names the caller's counters (`rls:<domain>`): no `failClosed` prefix is theirs.
      failClosedPath: false,
    };
    const attempt: Attempt = {
      prepared: this.#prepared,
      request: { path },
      identity,
      path,
      started,
      waited: false,
    };
    return this.#applyCounters(attempt, started, match, counters, false);
  }

  /**
   * One store call for a request's counters (or the block cache, or the fail mode): the
   * decision. `now` is the time they are counted at; `started`, when the decision began.
   */
  #applyCounters(
    attempt: Attempt,
    now: number,
    match: Match,
    counters: readonly CounterSpec[],
    verified: boolean,
  ): Decision | Promise<Decision> {
    const { request } = attempt;
    const { policy } = attempt.prepared;
    const { compiled, rules } = match;
    const cache = this.#blockCache;
    const blocked = cache?.blockedUntil(counters, now);
    if (cache !== undefined && blocked !== undefined) {
      // A reset elsewhere may have ended the block: read the store's log first when it is due.
      const checking = this.#resetWatch?.due(now, this.#budgetOf(policy, counters));
      if (checking !== undefined) {
        return checking.then(() => this.#applyCounters(attempt, now, match, counters, verified));
      }
      cache.answered();
      const at = counters.findIndex((counter) => counter.key === blocked.key);
      const { rule } = compiled[at] as CompiledRule;
      return this.#finish(attempt, [rule], cachedBlock(rule, blocked, now));
    }
    const store = this.store;
    const applySync = this.#applySync;
    if (applySync !== undefined) {
      // The in-process store answers at once: no promise, no timer.
      let states: CounterState[];
      try {
        states = applySync(counters, now);
      } catch (error) {
        const cause = this.#storeFailed(error, request);
        const failed = this.#local.decide(policy, match, counters, verified, now, cause);
        return this.#finish(attempt, failed.rules, failed);
      }
      const counted = decideFromCounts(compiled, counters, states, verified, this.#blockCache, now);
      return this.#finish(attempt, rules, counted);
    }
    const budget = this.#budgetOf(policy, counters);
    this.#resetWatch?.prime(now, budget);
    // What this process admitted on its own while the store was failed rides along (store-debt.ts).
    const paying = this.#local.pay(counters, now);
    return withinBudget(
      (progress) => store.apply(paying?.counters ?? counters, now, progress),
      budget,
      store.name,
      this.#scheduler,
    ).then(
      (states) => {
        if (paying !== undefined) this.#local.settle(paying, states);
        return this.#finish(
          attempt,
          rules,
          decideFromCounts(compiled, counters, states, verified, this.#blockCache, now),
        );
      },
      (error: unknown) => {
        if (paying !== undefined) this.#local.settle(paying, undefined);
        const cause = this.#storeFailed(error, request);
        const slow = stillAnswering(error, store);
        const failed = this.#local.decide(policy, match, counters, verified, now, cause, slow);
        return this.#finish(attempt, failed.rules, failed);
      },
    );
  }

  /** The budget of a store call for these counters (see deadline.ts). */
  #budgetOf(policy: ResolvedPolicy, counters: readonly CounterSpec[]): BudgetTimes {
    const { budgetMs, connectBudgetMs } = policy;
    return { budgetMs, connectBudgetMs, expectedRoundTripMs: this.#roundTripMs?.(counters) ?? 0 };
  }

  /** Reports a store failure to the observer, and returns its cause in words. */
  #storeFailed(error: unknown, request: RequestDescription): string {
    try {
      this.#onStoreError?.(error, request);
    } catch {
      // Observers must never change a decision.
    }
    return error instanceof Error ? error.message : String(error);
  }

  #finish(attempt: Attempt, rules: readonly ResolvedRule[], counted: CountedDecision): Decision {
    const { identity } = attempt;
    return {
      action: counted.action,
      reason: counted.reason,
      rule: counted.rule,
      outcome: counted.outcome,
      outcomes: counted.outcomes,
      rules,
      shadowed: counted.shadowed,
      retryAfterSeconds: counted.retryAfterSeconds,
      tier: identity.tier,
      plan: identity.plan,
      subject: primarySubject(identity),
      path: attempt.path,
      durationMs: this.#clock() - attempt.started,
      storeError: counted.storeError,
    };
  }
}

/**
 * A policy with `counting: hybrid` rules needs a store that reserves (`hybridCounting()` in
 * front of it, built where the store is made), or one in this process, where a hybrid rule is
 * counted exactly at no cost. Counting such rules exactly on a remote store would quietly cost
 * what hybrid counting is chosen to save: say so instead.
 */
function checkHybridStore(policy: ResolvedPolicy, store: Store): void {
  const traits = store.traits;
  if (traits?.hybrid === true || traits?.applySync !== undefined) return;
  const hybrid = policy.rules.find((rule) => rule.counting === "hybrid");
  if (hybrid === undefined) return;
  throw new EdgelimitError(
    "EL_HYBRID_STORE",
    `rule "${hybrid.id}" has counting: hybrid, which reserves capacity ahead in the store: wrap the ${store.name} store where you make it, as in createLimiter({ store: hybridCounting(store), ... }) (hybridCounting is exported by "edgelimit"), or set counting: exact`,
  );
}

function prepare(policy: ResolvedPolicy, tokens: TokenVerifier | undefined): Prepared {
  return {
    policy,
    identifier: new Identifier(policy, tokens),
    matcher: new RuleMatcher(policy),
    counters: new CounterBuilder(policy.rules.length),
    allow: new CidrSet(policy.allowlist),
    deny: new CidrSet(policy.denylist),
  };
}

function listed(
  own: CidrSet,
  extra: readonly AddressList[] | undefined,
  address: Address | undefined,
): boolean {
  if (address === undefined) return false;
  if (own.size > 0 && own.has(address)) return true;
  return extra?.some((list) => list.has(address)) ?? false;
}

function anyChallenges(match: Match): boolean {
  return match.rules.some((rule) => rule.action === "challenge");
}

/** A decision no counter took part in (lists, no matching rule). */
function unlisted(action: "allow" | "block", reason: Decision["reason"]): CountedDecision {
  return {
    action,
    reason,
    rule: undefined,
    outcome: undefined,
    outcomes: NO_OUTCOMES,
    shadowed: NO_NAMES,
    retryAfterSeconds: 0,
  };
}
