/**
 * `createLimiter`: the decision engine (`core/`) with its HTTP presentation (`http/`), which
 * every adapter and the gateway use. A newcomer's map: core/engine.ts decides, http/respond.ts
 * answers, this file joins them and builds the token verifier the policy asks for.
 */
import type { CountingStep } from "./core/count-step.js";
import {
  type AddressList,
  DecisionEngine,
  type EngineCompanions,
  type EngineOptions,
} from "./core/engine.js";
import { EdgelimitError } from "./core/errors.js";
import type { TokenVerifier } from "./core/identify.js";
import type { LocalCountingStatus } from "./core/local-fallback.js";
import type { ResolvedPolicy } from "./core/model.js";
import {
  checkOptions,
  fields,
  type OptionsShape,
  POLICY,
  required,
  STORE,
} from "./core/options.js";
import { OverrideAdmin } from "./core/override-admin.js";
import {
  OverrideWatch,
  type OverrideWatchOptions,
  type RefreshOnRequest,
} from "./core/override-watch.js";
import {
  DEFAULT_FIRST_READ_WAIT_MS,
  DEFAULT_OVERRIDE_REFRESH_MS,
  type Override,
} from "./core/overrides.js";
import type { Peek } from "./core/peek.js";
import type { SecretContext } from "./core/secrets.js";
import type { ChallengeClient, RequestDescription, Store } from "./core/types.js";
import { Responder, type Verdict } from "./http/respond.js";
import { JwtVerifier } from "./tokens/jwt.js";
import { causeOf, RateLimitedWarning } from "./warnings.js";

export type { AddressList, LocalCountingStatus, Verdict };

/** What the limiter consults beside the policy, built from it (see `Limiter.reload`). */
export type LimiterCompanions = EngineCompanions;

export interface LimiterOptions
  extends SecretContext,
    Omit<EngineOptions, "tokens" | "onStoreError" | "overrideWatch"> {
  /**
   * Called with the cause each time the store fails a decision (before the rule's fail mode
   * applies). Default: a warning on the console, at most one line every 10 s with the cause and
   * how many more failed meanwhile. `false` turns it off. Must not throw.
   */
  readonly onStoreError?: ((error: unknown, request: RequestDescription) => void) | false;
  /** Called once per decision, after the verdict is built (metrics, logs). Must not throw. */
  readonly onDecision?: (verdict: Verdict, request: RequestDescription) => void;
  /**
   * Verifies the policy's tokens. Default: a JWT verifier (jose) built from the policy's
   * `identity.user.jwt`, with secrets read through `env` and `readFile`.
   */
  readonly tokens?: (policy: ResolvedPolicy) => TokenVerifier | undefined;
  /**
   * Operators' overrides, read from the store (memory, Redis, Redis over HTTP, DynamoDB) in the
   * background every `refreshMs` (default 5 s: how long a change made elsewhere takes to apply
   * here); never on a request's path. `false`: none are read. `onRequest`: refreshed by the
   * requests that find the snapshot `refreshMs` old, not by a timer, for runtimes that run
   * nothing between requests (override-watch.ts); the default on a store with `requestScopedIo`
   * (workerd), with a `firstWaitMs` of 500 ms, where overrides are read only if this option is
   * given or the policy has an `overrides:` section. `watch`: makes the watch from these options
   * (default: one over the store's `overrides()`); the Lambda@Edge bundle passes its own, from a
   * file of its own, so that the file every cold start loads carries none of that code
   * (adapters/lambda-edge/overrides.ts). See docs/overrides.md.
   */
  readonly overrides?:
    | false
    | {
        readonly refreshMs?: number;
        readonly onRequest?: RefreshOnRequest | undefined;
        readonly watch?: ((options: OverrideWatchOptions) => OverrideWatch) | undefined;
      }
    | undefined;
}

function limiterShape() {
  return {
    policy: required(POLICY),
    store: required(STORE),
    tokens: "function",
    clock: "function",
    scheduler: "object",
    onStoreError: ["function", false],
    onDecision: "function",
    blockCache: [false, fields({ maxKeys: "number" })],
    localFallback: fields({ maxKeys: "number" }),
    passes: "object",
    allowlists: "array",
    denylists: "array",
    env: "object",
    readFile: "function",
    overrides: [
      false,
      fields({
        refreshMs: "number",
        onRequest: fields({ firstWaitMs: required("number") }),
        watch: "function",
      }),
    ],
  } satisfies OptionsShape<LimiterOptions>;
}

/**
 * Turns a policy and a store into verdicts. `check` takes a plain description of a request and
 * resolves to a verdict; it never throws for a store failure (the rules' fail modes apply) and
 * never waits for a store longer than the policy's time budget.
 */
export class Limiter {
  readonly #engine: DecisionEngine;
  readonly #options: LimiterOptions;
  readonly #clock: () => number;
  readonly #overrides: OverrideAdmin | undefined;
  #responder: Responder;

  /**
   * `step`: a counting step on the same store to share with another caller (the rate limit
   * service's configuration mode, which counts beside its policy); its own block cache, local
   * fallback and store-failure observer then stand for the options'. `createLimiter` takes
   * none: the limiter makes its own.
   */
  constructor(options: LimiterOptions, step?: CountingStep) {
    if (typeof EDGELIMIT_BUNDLE === "undefined")
      checkOptions("createLimiter", options, limiterShape());
    this.#options = options;
    this.#clock = options.clock ?? Date.now;
    // In the Lambda@Edge bundles the watch comes only from `overrides.watch` (their stores keep
    // none, and the viewer-request file's size is bounded: docs/aws.md). A Worker's build
    // defines no EDGELIMIT_BUNDLE: its limiter reads them on requests (adapters/cloudflare).
    const watch =
      step === undefined
        ? overrideWatch(options, () => this.#engine.step.forgetBlocks())
        : undefined;
    this.#engine = new DecisionEngine(
      {
        ...options,
        tokens: this.#tokensFor(options.policy),
        onStoreError: storeErrorObserver(options),
        overrideWatch: watch,
      },
      step,
    );
    this.#responder = new Responder(options.policy);
    const held = this.#engine.step.overrides;
    if (held !== undefined) {
      if (typeof EDGELIMIT_BUNDLE === "undefined")
        this.#overrides = new OverrideAdmin(held.source, () => this.policy, this.#clock, held);
      // Now, not at the first request: a Lambda@Edge cold start's init overlaps the first read.
      void held.start();
    }
  }

  /**
   * Operators' overrides in the store (docs/overrides.md): `set`, `list`, `remove`, `changes`.
   * A change applies on this instance at once and on the others within their refresh. Throws
   * `EL_OVERRIDE_STORE` on a store that keeps none (or with `overrides: false`).
   */
  get overrides(): OverrideAdmin {
    if (this.#overrides !== undefined) return this.#overrides;
    throw new EdgelimitError(
      "EL_OVERRIDE_STORE",
      `the ${this.store.name} store keeps no overrides here; the memory, Redis, Redis-over-HTTP, DynamoDB and Cloudflare stores do (and only with the overrides option not false)`,
    );
  }

  /** Stops the background work this limiter started (reading overrides); the store stays open. */
  close(): void {
    this.#engine.step.close();
  }

  get policy(): ResolvedPolicy {
    return this.#engine.policy;
  }

  get store(): Store {
    return this.#engine.store;
  }

  /** Round trips the block cache saved since start. */
  get blockCacheHits(): number {
    return this.#engine.blockCacheHits;
  }

  /**
   * The overrides this limiter holds now (its snapshot of the store's, expired ones included
   * until the next refresh drops them), or undefined when it reads none. Read in memory: the
   * dashboard and metrics show it without a store call. The array is the same until it changes.
   */
  get heldOverrides(): readonly Override[] | undefined {
    return this.#engine.step.overrides?.table.all;
  }

  /** What `failMode: local` rules counted in this process while the store was failed. */
  get localCounting(): LocalCountingStatus {
    return this.#engine.localCounting;
  }

  /**
   * Swaps the policy in place. Counters live in the store, so they survive; a policy that does
   * not compile throws and the running one stays.
   */
  reload(policy: ResolvedPolicy, companions?: LimiterCompanions): void {
    const responder = new Responder(policy);
    this.#engine.reload(policy, this.#tokensFor(policy), companions);
    this.#responder = responder;
  }

  /**
   * The subject a request is counted as (`ip:203.0.113.7`, `user:u_abc`), resolved exactly as
   * `check` does. Challenge pages bind their passes to it.
   */
  subjectOf(request: RequestDescription): Promise<string> {
    return this.#engine.subjectOf(request);
  }

  /**
   * Forgets the counters `request` would be counted on (every matched rule, or the ones named),
   * for example the login rule's after a successful login: `limiter.reset(request, ["login"])`.
   * Resolves to the ids of the rules reset. The memory and Redis stores can reset.
   */
  reset(request: RequestDescription, ruleIds?: readonly string[]): Promise<string[]> {
    return this.#engine.reset(request, ruleIds);
  }

  /** The client as `check` sees it: its trusted address and its subject (challenge pages). */
  clientOf(request: RequestDescription): Promise<ChallengeClient> {
    return this.#engine.clientOf(request);
  }

  /**
   * For each rule `request` matches, its `limit`, `remaining` and `reset` as `check` would report
   * them, counting nothing: one store call at cost 0 that writes nothing, with no decision
   * observed (`onDecision`) and the block cache left alone. Resolves even when the store fails
   * (`storeError`; see core/peek.ts for what each rule then reports).
   */
  peek(request: RequestDescription): Promise<Peek> {
    return this.#engine.peek(request);
  }

  check(request: RequestDescription): Promise<Verdict> {
    try {
      return Promise.resolve(this.decide(request));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * `check` without the promise when nothing has to wait: a cached (or absent) identity and
   * the in-process store give the verdict synchronously (the gateway uses it); it may still
   * return a promise.
   */
  decide(request: RequestDescription): Verdict | Promise<Verdict> {
    const responder = this.#responder;
    const decision = this.#engine.decide(request);
    if (decision instanceof Promise) {
      return decision.then((known) => this.#present(responder, known, request));
    }
    return this.#present(responder, decision, request);
  }

  #present(
    responder: Responder,
    decision: Awaited<ReturnType<DecisionEngine["decide"]>>,
    request: RequestDescription,
  ): Verdict {
    const verdict = responder.respond(decision, request.path, this.#clock());
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

  #tokensFor(policy: ResolvedPolicy): TokenVerifier | undefined {
    if (this.#options.tokens !== undefined) return this.#options.tokens(policy);
    const jwt = policy.identity.jwt;
    return jwt === undefined ? undefined : new JwtVerifier(jwt, this.#options);
  }
}

function storeErrorObserver(
  options: LimiterOptions,
): ((error: unknown, request: RequestDescription) => void) | undefined {
  if (options.onStoreError === false) return undefined;
  if (options.onStoreError !== undefined) return options.onStoreError;
  const name = options.store.name;
  const warning = new RateLimitedWarning((line, suppressed) =>
    console.warn(suppressed > 0 ? `${line} (${suppressed} more since the last warning)` : line),
  );
  return (error) =>
    warning.warn(
      `edgelimit: the ${name} store failed a decision, so the rules' fail modes applied (local, open or closed): ${causeOf(error)}`,
    );
}

/**
 * The overrides watch for `options.store`, when it keeps overrides and they are wanted; the rate
 * limit service makes its own with it. `onChange`: forgets the blocks a change may have ended.
 */
export function overrideWatch(
  options: Pick<LimiterOptions, "store" | "policy" | "overrides">,
  onChange: () => void,
): OverrideWatch | undefined {
  if (options.overrides === false) return undefined;
  // In a Worker every isolate would pay a read per `refreshMs` (on Upstash, a billed command)
  // and a new one would wait for its first: read there when the policy bounds overrides (its
  // `overrides:` section) or they are asked for, as the edge editions decide.
  if (
    options.overrides === undefined &&
    options.store.traits?.requestScopedIo === true &&
    options.policy.overrides === undefined
  )
    return undefined;
  const make = options.overrides?.watch ?? ownWatch(options.store);
  if (make === undefined) return undefined;
  const refreshMs =
    options.overrides?.refreshMs ??
    options.policy.overrides?.refreshMs ??
    DEFAULT_OVERRIDE_REFRESH_MS;
  const onRequest = options.overrides?.onRequest;
  // A bundle's options are written by `edgelimit build`, checked there.
  if (typeof EDGELIMIT_BUNDLE === "undefined") checkWatchOptions(refreshMs, onRequest);
  return make({
    refreshMs,
    onRequest,
    // A new limit or an allow may end a block the block cache still holds.
    onChange,
  });
}

/** A watch over the store's own overrides; none in a bundle (its code stays out of it). */
function ownWatch(store: Store): ((options: OverrideWatchOptions) => OverrideWatch) | undefined {
  const source = store.overrides;
  return typeof EDGELIMIT_BUNDLE === "undefined" && source !== undefined
    ? (watchOptions) => new OverrideWatch(source.call(store), requestDriven(store, watchOptions))
    : undefined;
}

/**
 * Where one request cannot await I/O another began (workerd: `StoreTraits.requestScopedIo`), an
 * isolate runs nothing between requests, so no timer could refresh the overrides: requests do
 * (override-watch.ts), as the Worker edition's do, with its defaults (a new isolate's first
 * requests wait at most 500 ms for the first read). A Worker hands the reads to its request's
 * `waitUntil` (`limiter.overrides.keepAlive`, which `edgelimit/fetch` calls).
 */
function requestDriven(store: Store, options: OverrideWatchOptions): OverrideWatchOptions {
  if (store.traits?.requestScopedIo !== true) return options;
  const onRequest = options.onRequest ?? { firstWaitMs: DEFAULT_FIRST_READ_WAIT_MS };
  return { ...options, onRequest: { ...onRequest, requestScopedIo: true } };
}

function checkWatchOptions(refreshMs: number, onRequest: RefreshOnRequest | undefined): void {
  if (!Number.isSafeInteger(refreshMs) || refreshMs < 10) {
    throw new EdgelimitError(
      "EL_BAD_OPTION",
      `createLimiter: overrides.refreshMs ${refreshMs} is not a whole number of milliseconds of 10 or more`,
    );
  }
  if (
    onRequest !== undefined &&
    (!Number.isSafeInteger(onRequest.firstWaitMs) || onRequest.firstWaitMs < 0)
  ) {
    throw new EdgelimitError(
      "EL_BAD_OPTION",
      `createLimiter: overrides.onRequest.firstWaitMs ${onRequest.firstWaitMs} is not a whole number of milliseconds of 0 or more`,
    );
  }
}

export function createLimiter(options: LimiterOptions): Limiter {
  return new Limiter(options);
}
