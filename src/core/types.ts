/**
 * The contract shared by the core, every store and every adapter.
 * Nothing here knows about a runtime, an HTTP framework or a cloud.
 */
import type { CounterSpec, CounterState } from "./counter-spec.js";
import type { BudgetTimes, Scheduler, StoreCallProgress } from "./deadline.js";
import type { RegionAllowances, RegionHolder } from "./hybrid/region-contracts.js";
import type { OverrideSource } from "./overrides.js";

export type { AlgorithmName, CounterSpec, CounterState, WindowSpec } from "./counter-spec.js";
export type { StoreCallProgress } from "./deadline.js";
export type { HolderState, RegionAllowances, RegionHolder } from "./hybrid/region-contracts.js";

/**
 * The only seam between the limiter and storage: `apply`, optionally `reset` and `close`, and
 * the store's `traits`. docs/stores.md shows a store written from this page, and the
 * conformance suite (test/conformance/) holds every store to it.
 *
 * `apply` receives every counter of one request, each key once (a caller that counts one
 * counter twice in a request sends it once with the costs added, as rls does for descriptors
 * that share a counter: stores need not agree on a key repeated in one call), and must,
 * atomically with respect to other calls on the same keys:
 * - admit the request when every `enforce` counter allows it;
 * - when admitted, count it on every counter;
 * - when refused, count it only on the `enforce` counters that refused it (windowed algorithms
 *   record the attempt; a token bucket never records a refused request), so that quotas the
 *   request never used are not spent;
 * - always count `observe` counters as their own algorithm would; a cost of 0 reads a counter
 *   and writes nothing (no key made, no expiry set, no window moved: `limiter.peek`).
 *
 * `now` is the caller's clock; a store with a clock of its own (Redis) may use that instead.
 * Windows never move backwards: a request stamped before a counter's newest window is counted
 * in that window (or, where windows are kept apart, in its own), never by reopening an older
 * one (see `countedAt` in algorithms/fixed-window.ts). A remote store performs one round trip
 * per call (or parallel round trips where keys live on different partitions, which the store
 * documents).
 */
export interface Store {
  readonly name: string;
  /**
   * `progress` lets a store tell the decision budget when it is setting up a connection for
   * this call, so that a fresh instance's handshake is not taken for a slow store (see
   * `core/deadline.ts`). A store that never reports setup may ignore it.
   */
  apply(
    counters: readonly CounterSpec[],
    now: number,
    progress?: StoreCallProgress,
  ): Promise<CounterState[]>;
  /**
   * Forgets these counters, as if they had never counted (a login that succeeded resets its
   * failures). `now` is the caller's clock, as in `apply`: a store that keeps windows apart
   * forgets the windows around it. Optional: `limiter.reset` refuses with a clear error on a
   * store without it.
   */
  reset?(counters: readonly CounterSpec[], now?: number): Promise<void>;
  /**
   * Lets a block cache hear of the resets other processes made: the limiter calls it once for
   * its cache. A store that keeps a log of resets answers a `ResetWatch` (core/reset-watch.ts)
   * that reads the log; the Redis stores do. A store with `reset` that several processes share
   * should have it: without it, their block caches refuse a reset counter until its block ends.
   * (A method rather than the log alone, so that bundles whose store keeps no log carry none of
   * the watch's code.)
   */
  followResets?(cache: ForgetsBlocks, scheduler: Scheduler): ResetFollower;
  /**
   * Where this store keeps operators' overrides (core/overrides.ts), beside the counters: the
   * memory, Redis (over HTTP too), DynamoDB and Cloudflare (a Durable Object) stores do. A limiter reads it in the
   * background, never on a request's path.
   */
  overrides?(): OverrideSource;
  close?(): Promise<void>;
  /** What the limiter and health pages read about the store besides its calls (all optional). */
  readonly traits?: StoreTraits;
  /**
   * Hybrid counting's region holder, where the store has one (DynamoDB with its opt-in
   * `regionHolder`, outside the lease region): units reserved for this region, spent by all
   * of its processes from its nearest replica (core/hybrid/holder.ts). Optional: without it
   * each process reserves from the store itself.
   */
  readonly holder?: RegionHolder;
  /**
   * Hybrid counting's region allowances, where the store has them (DynamoDB with its opt-in
   * `regionAllowance`): a subject's first request in a window in a region far from the lease
   * region is answered there, from a unit the lease item held back for that region
   * (core/hybrid/allowance.ts).
   */
  readonly allowances?: RegionAllowances;
}

/** The blocks a `ResetFollower` forgets: the block cache (core/block-cache.ts). */
export interface ForgetsBlocks {
  forget(key: string): void;
  clear(): void;
}

/** Asked by the limiter before its block cache answers (core/reset-watch.ts). */
export interface ResetFollower {
  /** With the limiter's first store call: read the log's mark before there is a block. */
  prime(now: number, times: BudgetTimes): void;
  /**
   * Undefined when the cache may answer at `now`; otherwise a promise that settles once the
   * log has been read and the blocks reset since forgotten (or the read failed).
   */
  due(now: number, times: BudgetTimes): Promise<void> | undefined;
}

/** What a store's log of resets answers (the read a `ResetWatch` makes). */
export interface ResetsSince {
  /** Where the store's log stands now: the mark to ask with next. */
  readonly mark: string;
  /**
   * The keys (`CounterSpec.key`) reset since the mark asked with, or `all` when the store cannot
   * tell (no mark, or its log no longer reaches back that far).
   */
  readonly keys: readonly string[] | "all";
}

/** What a store says about itself. A remote store written from scratch needs none of it. */
export interface StoreTraits {
  /**
   * The store lives in this process and answers at once: the limiter calls this instead of
   * `apply`, with no promise, no timer and no block cache, and counts a `counting: hybrid` rule
   * exactly (reservations save nothing here). It must answer as `apply` would.
   */
  readonly applySync?: (counters: readonly CounterSpec[], now: number) => CounterState[];
  /**
   * A call one request started cannot be awaited by another (Workers: I/O belongs to the
   * request that made it). Hybrid counting then never shares a reservation in flight.
   */
  readonly requestScopedIo?: boolean;
  /**
   * Milliseconds a healthy answer to a call with these counters takes at least: the known round
   * trip to the replica in use (Lambda@Edge far from its nearest replica). Added to the decision
   * budget, so that distance alone never makes a healthy store count as failed. Default 0.
   */
  readonly roundTripMs?: (counters: readonly CounterSpec[]) => number;
  /**
   * The store spends `counting: hybrid` counters from capacity reserved ahead: it is
   * `hybridCounting()` (core/hybrid-counting.ts) in front of a store. A policy with hybrid rules
   * needs such a store, unless the store lives in this process.
   */
  readonly hybrid?: boolean;
  /** How the store's own calls are going, for health pages (remote stores). */
  readonly status?: () => StoreStatus;
}

/**
 * A remote store's view of itself: what its calls saw, apart from the decisions (which the
 * limiter reports). Shown by `/healthz` and the dashboard.
 */
export interface StoreStatus {
  /**
   * `ok`: answering. `connecting`: the first connection is under way. `failing`: calls failed
   * since the last success. `open`: the circuit breaker is open (on a Cluster: for at least one
   * node, see `openParts`), so calls fail at once without waiting.
   */
  readonly state: "ok" | "connecting" | "failing" | "open";
  /** Calls that failed since start (errors, timeouts, refused by an open breaker excluded). */
  readonly failures: number;
  readonly lastError: string | undefined;
  /** Epoch milliseconds of the last failure. */
  readonly lastErrorAt: number | undefined;
  /** Times a circuit breaker opened since start. */
  readonly breakerOpened: number;
  /** Calls an open breaker refused without reaching the server since start. */
  readonly breakerRejected: number;
  /** What has its breaker open now: the endpoint, or a Cluster's nodes (`10.0.0.3:6379`). */
  readonly openParts: readonly string[];
}

/**
 * Checks a signed pass (see the challenge module). A verified pass lifts the challenge band for
 * its holder but never the hard limit. `subject` is the counted subject the pass must be bound to.
 */
export interface PassVerifier {
  verify(request: RequestDescription, subject: string, now: number): boolean | Promise<boolean>;
}

/**
 * Serves the challenge page and its verification endpoints under `path`, with Web-standard
 * Request/Response so that every runtime can mount it. `clientIp` is the address the limiter
 * resolved (never a header the client wrote).
 */
export interface ChallengeHandler {
  readonly path: string;
  readonly passes: PassVerifier;
  handle(request: Request, client: ChallengeClient): Promise<Response>;
}

/** Who a challenge page is served to: the trusted client address and the counted subject. */
export interface ChallengeClient {
  readonly ip: string | undefined;
  readonly subject: string;
}

/** A plain description of an incoming request: what adapters translate to. */
export interface RequestDescription {
  /** The socket peer address, as the runtime reports it. */
  readonly ip?: string;
  readonly method?: string;
  /** Path, optionally with a query string (it is ignored for matching). */
  readonly path: string;
  /**
   * Whether the framework serving the request routes letter case exactly, when its adapter
   * knows (Express: its `case sensitive routing` setting; Fastify, Hono: true); the policy's
   * `paths.caseSensitive` comes first. Unknown, every casing of a rule's path counts against it.
   */
  readonly caseSensitiveRouting?: boolean | undefined;
  /** Header names in any case; values as strings (multiple values joined with ", "). */
  readonly headers?: Readonly<Record<string, string | string[] | undefined>> | Headers;
  /**
   * Every name in a plain-object `headers` is lower case, as in Node's `IncomingMessage`: an
   * absent header is then not searched for in other spellings.
   */
  readonly lowerCaseHeaders?: boolean;
  /** Extra cost of this request (default: the rule's cost, 1 by default). */
  readonly cost?: number;
  /**
   * A user the application has verified itself (its session), from the middleware's `user`
   * option. Believed only when the policy says `identity.user.application: true`; a token or a
   * trusted header, when the policy has one, comes first.
   */
  readonly user?: { readonly id: string; readonly plan?: string | undefined } | undefined;
  /** A verified pass for this subject was presented (see the challenge module). */
  readonly passVerified?: boolean;
}

export type Action = "allow" | "block" | "challenge" | "unavailable";

/** Why the verdict came out as it did. */
export type Reason =
  | "within-limit"
  | "over-limit"
  | "challenge-band"
  | "allowlisted"
  | "denylisted"
  | "no-rule"
  | "store-failed-open"
  | "store-failed-closed"
  /** The store failed; the rules whose fail mode is `local` were counted in this process. */
  | "store-failed-local"
  | "blocked-cached"
  /** An operator's override refused this subject (core/overrides.ts). */
  | "override-block"
  /** An operator's override lets this subject through every rule it matched, uncounted. */
  | "override-allow";

export type Tier = "anonymous" | "authenticated";

/** One rule's outcome for one request. */
export interface RuleOutcome {
  readonly ruleId: string;
  readonly namespace: string;
  readonly key: string;
  readonly limit: number;
  readonly state: CounterState;
  readonly shadow: boolean;
}
