/**
 * The rate limit service's decisions, whatever the protocol: `shouldRateLimit` for gRPC and
 * `POST /json`, `check` for forward-auth. A call whose domain the `--config` names is decided by
 * that configuration; any other domain by the `--policy` (when there is one). Both count through
 * one counting step on the store (core/count-step.ts), so their counters live side by side and
 * share its block cache and local counting, and both reload in place.
 */
import { CountingStep } from "../core/count-step.js";
import type { EngineCompanions } from "../core/engine.js";
import type { LocalCountingStatus } from "../core/local-fallback.js";
import type { ResolvedPolicy } from "../core/model.js";
import type { RequestDescription, Store } from "../core/types.js";
import type { Verdict } from "../http/respond.js";
import { Limiter, overrideWatch } from "../limiter.js";
import { definePolicy } from "../policy/load.js";
import type { DecisionRecord, RlsAnswer } from "./answer.js";
import type { RlsConfig } from "./config.js";
import { type ConfigDecideOptions, decideByConfig } from "./config-decide.js";
import type { RateLimitRequest } from "./messages.js";
import { PolicyDecider } from "./policy-decide.js";
import { checkRequestLimits, type RequestLimits, requestLimitsOf } from "./request-limits.js";

export interface RateLimitServiceOptions {
  /**
   * A remote store comes with `hybridCounting` in front (stores/from-url.ts), so that
   * `counting: hybrid` descriptors and rules reserve; without it they are counted exactly.
   */
  readonly store: Store;
  readonly config?: RlsConfig | undefined;
  readonly policy?: ResolvedPolicy | undefined;
  readonly companions?: EngineCompanions | undefined;
  readonly globalShadow?: boolean;
  readonly limitHeaders?: ConfigDecideOptions["limitHeaders"];
  /** Environment for the policy's `{ env: NAME }` secrets (default process.env). */
  readonly env?: Readonly<Record<string, string | undefined>>;
  readonly readFile?: (path: string) => string;
  readonly clock?: () => number;
  /** Called with every decision (metrics, the dashboard). Must not throw. */
  readonly onDecision?: (record: DecisionRecord) => void;
  /** Called with the cause each time the store fails a decision. Must not throw. */
  readonly onStoreError?: (error: unknown) => void;
  /** What one call may hold (request-limits.ts has the defaults and why). */
  readonly requestLimits?: Partial<RequestLimits> | undefined;
}

export class RateLimitService {
  readonly store: Store;
  readonly #options: RateLimitServiceOptions;
  readonly #clock: () => number;
  /** The configuration's counters and the policy's limiter both count through it. */
  readonly #step: CountingStep;
  readonly #configOptions: ConfigDecideOptions;
  readonly #requestLimits: RequestLimits;
  #config: RlsConfig | undefined;
  #basePolicy: ResolvedPolicy;
  #limiter: Limiter | undefined;
  #policyDecider: PolicyDecider | undefined;

  /**
   * What the rules count in this process while the store is failed (`failMode: local`), the
   * configuration's and the policy's alike, for /healthz and the dashboard.
   */
  get localCounting(): LocalCountingStatus {
    return this.#step.localCounting;
  }

  constructor(options: RateLimitServiceOptions) {
    this.#options = options;
    this.store = options.store;
    this.#clock = options.clock ?? Date.now;
    this.#config = options.config;
    this.#requestLimits = requestLimitsOf(options.requestLimits);
    // The configuration's counters take the policy's budget when there is one.
    this.#basePolicy = options.policy ?? definePolicy({ version: 1 });
    const onStoreError = options.onStoreError;
    // Operators' overrides, where the store keeps them (docs/overrides.md): read in the
    // background once there is a policy (#usePolicy), applied to its rules; a configuration's
    // descriptors have no subject an override can name, so without a policy nothing is read.
    // A change may end a block the block cache holds.
    const overrides = overrideWatch({ store: options.store, policy: this.#basePolicy }, () =>
      this.#step.forgetBlocks(),
    );
    this.#step = new CountingStep({
      store: options.store,
      onStoreError: onStoreError === undefined ? undefined : (error) => onStoreError(error),
      overrides,
    });
    this.#configOptions = {
      globalShadow: options.globalShadow ?? false,
      limitHeaders: options.limitHeaders,
      clock: this.#clock,
    };
    if (options.policy !== undefined) this.#usePolicy(options.policy, options.companions);
  }

  /** What one call may hold. */
  get requestLimits(): RequestLimits {
    return this.#requestLimits;
  }

  get config(): RlsConfig | undefined {
    return this.#config;
  }

  get policy(): ResolvedPolicy | undefined {
    return this.#limiter?.policy;
  }

  /** The policy whose budget the configuration's counters run under: `--policy`, or an empty one. */
  get basePolicy(): ResolvedPolicy {
    return this.#basePolicy;
  }

  /** Store round trips the block cache saved since start. */
  get blockCacheHits(): number {
    return this.#step.blockCacheHits;
  }

  /**
   * Throws `EL_RLS_REQUEST` for a call without a domain or descriptors, or beyond the request
   * limits; nothing else for any call.
   */
  shouldRateLimit(
    request: RateLimitRequest,
    peer: string | undefined,
  ): RlsAnswer | Promise<RlsAnswer> {
    checkRequestLimits(request, this.#requestLimits);
    const config = this.#config;
    const decider = this.#policyDecider;
    const byPolicy =
      decider !== undefined && (config === undefined || !config.domains.has(request.domain));
    const answer = byPolicy
      ? decider.decide(request, peer)
      : decideByConfig(
          this.#step,
          this.#basePolicy,
          config ?? EMPTY_CONFIG,
          request,
          this.#configOptions,
        );
    if (answer instanceof Promise) return answer.then((known) => this.#observed(known));
    return this.#observed(answer);
  }

  /** Forward-auth: the policy's verdict for the request a proxy describes; undefined without one. */
  check(request: RequestDescription): Verdict | Promise<Verdict> | undefined {
    const decided = this.#limiter?.decide(request);
    if (decided instanceof Promise) return decided.then((verdict) => this.#recorded(verdict));
    return decided === undefined ? undefined : this.#recorded(decided);
  }

  /** The policy's limiter (challenge pages resolve their client with it). */
  get limiter(): Limiter | undefined {
    return this.#limiter;
  }

  /** Stops reading overrides in the background; the store stays open. */
  close(): void {
    this.#step.close();
  }

  /** Swaps the configuration; counters live in the store and are kept. */
  useConfig(config: RlsConfig): void {
    this.#config = config;
  }

  /** Swaps the policy (and what was built from it); counters are kept. Throws if it cannot. */
  usePolicy(policy: ResolvedPolicy, companions?: EngineCompanions): void {
    this.#usePolicy(policy, companions);
    this.#basePolicy = policy;
    // Blocks remembered under the old policy's budget or rules may be longer than the new ones.
    this.#step.forgetBlocks();
  }

  #usePolicy(policy: ResolvedPolicy, companions: EngineCompanions | undefined): void {
    // Once, at the first policy (start() reads the source the first time only).
    void this.#step.overrides?.start();
    if (this.#limiter !== undefined) {
      this.#limiter.reload(policy, companions);
      return;
    }
    const options = this.#options;
    this.#limiter = new Limiter(
      {
        policy,
        store: options.store,
        clock: this.#clock,
        env: options.env,
        readFile: options.readFile,
        ...companions,
        // The step reports store failures (to `options.onStoreError`).
        onStoreError: false,
      },
      this.#step,
    );
    this.#policyDecider = new PolicyDecider(this.#limiter, this.#clock);
  }

  #observed(answer: RlsAnswer): RlsAnswer {
    this.#recorded(answer.record);
    return answer;
  }

  #recorded<Record extends DecisionRecord>(record: Record): Record {
    try {
      this.#options.onDecision?.(record);
    } catch {
      // Observers must never change a decision.
    }
    return record;
  }
}

const EMPTY_CONFIG: RlsConfig = { domains: new Map(), limits: [], files: [] };
