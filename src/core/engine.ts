/**
 * The decision engine: a request description in, a `Decision` out. This file only orchestrates;
 * each step lives in a file named for it (identify, match, counters, deadline, outcome).
 */
import { checkCost } from "./cost.js";
import { CountingStep, type CountingStepOptions } from "./count-step.js";
import { CounterBuilder } from "./counters.js";
import type { Scheduler } from "./deadline.js";
import type { Decision } from "./decision.js";
import { EdgelimitError } from "./errors.js";
import { Identifier, type Identity, primarySubject, type TokenVerifier } from "./identify.js";
import { type Address, CidrSet } from "./ip.js";
import type { LocalCountingStatus } from "./local-fallback.js";
import { type Match, RuleMatcher } from "./match.js";
import type { ResolvedPolicy, ResolvedRule } from "./model.js";
import type { CountedDecision } from "./outcome.js";
import type { OverrideWatch } from "./override-watch.js";
import { normalizePath } from "./path.js";
import type { Peek } from "./peek.js";
import type {
  ChallengeClient,
  PassVerifier,
  RequestDescription,
  RuleOutcome,
  Store,
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
  /** The operators' overrides, held in this process (the limiter makes it; override-watch.ts). */
  readonly overrideWatch?: OverrideWatch | undefined;
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
 * Decides requests for a policy against a store: identifies the client, matches the rules,
 * builds the counters and hands them to the counting step (count-step.ts), which every entry
 * into the core shares. `decide` never throws for a store failure (the rules' fail modes apply)
 * and never waits for a store longer than the policy's budget (see `deadline.ts`).
 */
export class DecisionEngine {
  readonly store: Store;
  /** Where the counters go: the block cache, the store within the budget, the fail modes. */
  readonly step: CountingStep;
  readonly #clock: () => number;
  #companions: EngineCompanions;
  #prepared: Prepared;

  /**
   * `step`: a counting step to share with another caller on the same store (the rate limit
   * service's configuration mode); its own options then stand for `options`' block cache,
   * local fallback, scheduler and store-failure observer.
   */
  constructor(options: EngineOptions, step?: CountingStep) {
    const store = options.store;
    this.store = store;
    this.#clock = options.clock ?? Date.now;
    this.#companions = options;
    checkHybridStore(options.policy, store);
    this.#prepared = prepare(options.policy, options.tokens);
    this.step =
      step ??
      new CountingStep({
        store,
        scheduler: options.scheduler,
        blockCache: options.blockCache,
        localFallback: options.localFallback,
        onStoreError: observer(options),
        overrides: options.overrideWatch,
      });
  }

  /** What `failMode: local` rules counted in this process while the store was failed. */
  get localCounting(): LocalCountingStatus {
    return this.step.localCounting;
  }

  get policy(): ResolvedPolicy {
    return this.#prepared.policy;
  }

  /** Round trips the block cache saved since start. */
  get blockCacheHits(): number {
    return this.step.blockCacheHits;
  }

  /** Swaps the policy; counters live in the store, so they survive. Throws if it cannot. */
  reload(
    policy: ResolvedPolicy,
    tokens: TokenVerifier | undefined,
    companions?: EngineCompanions,
  ): void {
    checkHybridStore(policy, this.store);
    this.#prepared = prepare(policy, tokens);
    this.step.forgetBlocks();
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

  /**
   * What `decide` would report for each rule `request` matches, counting nothing (peek.ts:
   * loaded on first use, so that a Lambda@Edge bundle, whose handlers never peek, leaves it out
   * of the file every cold start loads; see src/cli/build.ts).
   */
  async peek(request: RequestDescription): Promise<Peek> {
    const prepared = this.#prepared;
    const companions = this.#companions;
    const { peekRequest } = await import("./peek.js");
    return peekRequest(request, {
      ...prepared,
      clock: this.#clock,
      read: (rules, counters, now) =>
        this.step.read({ terms: prepared.policy, rules, counters, now }),
      overridden: (rules, counters, passVerified, now) =>
        this.step.overridden(rules, counters, passVerified, now),
      listedAs: (address) =>
        listed(prepared.deny, companions.denylists, address)
          ? "denylisted"
          : listed(prepared.allow, companions.allowlists, address)
            ? "allowlisted"
            : undefined,
      passes: companions.passes,
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
    this.step.forgetBlocksOf(counters);
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
      return this.#finish(attempt, unlisted("block", "denylisted"));
    }
    if (listed(prepared.allow, this.#companions.allowlists, address)) {
      return this.#finish(attempt, unlisted("allow", "allowlisted"));
    }
    const match = prepared.matcher.match(identity, attempt.path, request);
    if (match.compiled.length === 0) {
      return this.#finish(attempt, unlisted("allow", "no-rule"));
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
    const counted = this.step.count({
      terms: prepared.policy,
      rules: match.rules,
      counters,
      failClosed: match.failClosedPath,
      passVerified: verified,
      // Counted at the time it reaches the store, not when it started: a token or pass check
      // may have taken a while (a late request costs the counter's newest window, countedAt).
      now: attempt.waited ? this.#clock() : attempt.started,
      request,
    });
    if (counted instanceof Promise) return counted.then((known) => this.#finish(attempt, known));
    return this.#finish(attempt, counted);
  }

  #finish(attempt: Attempt, counted: CountedDecision): Decision {
    const { identity } = attempt;
    return {
      action: counted.action,
      reason: counted.reason,
      rule: counted.rule,
      outcome: counted.outcome,
      outcomes: counted.outcomes,
      rules: counted.rules,
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
    rules: NO_RULES,
    shadowed: NO_NAMES,
    retryAfterSeconds: 0,
  };
}

/** The engine's store-failure observer as the counting step calls it (always with a request). */
function observer(options: EngineOptions): CountingStepOptions["onStoreError"] {
  const observe = options.onStoreError;
  if (observe === undefined) return undefined;
  return (error, request) => {
    if (request !== undefined) observe(error, request);
  };
}
