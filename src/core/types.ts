/**
 * The contract shared by the core, every store and every adapter.
 * Nothing here knows about a runtime, an HTTP framework or a cloud.
 */
import type { BudgetTimes, Scheduler, StoreCallProgress } from "./deadline.js";
import type { OverrideSource } from "./overrides.js";

export type { StoreCallProgress } from "./deadline.js";

export type AlgorithmName = "fixed-window" | "sliding-window" | "token-bucket";

/** A window is either a fixed length in milliseconds or a number of calendar months (UTC). */
export type WindowSpec = { readonly ms: number } | { readonly months: number };

/**
 * One counter that a request touches. A store receives all of one request's counters in a
 * single call and must apply them atomically (see `Store.apply`).
 */
export interface CounterSpec {
  /** Full, encoded key: `<subject>|<namespace>|<scope>`. Unique per counter. */
  readonly key: string;
  /** The encoded subject part of the key (`ip:203.0.113.7`); Redis Cluster uses it as the hash tag. */
  readonly subject: string;
  readonly algorithm: AlgorithmName;
  /** Admission threshold for this call (a pass holder's threshold is the challenge band). */
  readonly limit: number;
  readonly window: WindowSpec;
  /** Units this request costs (default 1). */
  readonly cost: number;
  /**
   * `enforce`: takes part in the admission decision. `observe`: a shadow rule; counted as if it
   * enforced, never blocks, and never stops the enforcing counters from counting.
   */
  readonly mode: "enforce" | "observe";
  /** The rule this counter belongs to (`anonymous.global`), for stores that route by rule. */
  readonly ruleId: string;
  /** The rule's namespace (operation); the Workers binding has one namespace each. */
  readonly namespace: string;
  /**
   * `hybrid`: the counter is spent from capacity reserved ahead (core/hybrid-counting.ts); a
   * store sees it only as reservations, which a store with several regions sends to its single
   * reservation authority (DynamoDB's `leaseRegion`). Default `exact`.
   */
  readonly counting?: "exact" | "hybrid";
}

/** The state of one counter after a store applied a request. */
export interface CounterState {
  /** Whether this counter alone would admit the request. */
  readonly allowed: boolean;
  /**
   * Units counted in the current window after this call (fixed window: the window's count;
   * sliding window: the weighted estimate, rounded up; token bucket: units in use).
   */
  readonly count: number;
  /** Units still available right now (never negative). */
  readonly remaining: number;
  /** Epoch ms at which the counter is back to full capacity. */
  readonly resetAt: number;
  /** Milliseconds until a request of the same cost could pass (0 when allowed). */
  readonly retryAfterMs: number;
  /**
   * True when the answer carries no count: `count` and `remaining` are placeholders, never
   * disclosed to clients or the origin and never used to decide. The Workers `ratelimits`
   * binding answers only whether the request passed; a counter that was never asked (another
   * refused the request first) has no count either. `resetAt` is then as far as can be told.
   */
  readonly countUnknown?: boolean;
  /**
   * Epoch ms on the store's own clock when it applied the call, where it counts on a clock of
   * its own (Redis `TIME`, a Durable Object's). Absent where it counts at the caller's `now`.
   * Hybrid counting measures from it how long the window it counted in has left, so that units
   * are never spent after the store's window ended, whatever this process's clock says.
   */
  readonly storeNow?: number;
  /**
   * Units the store holds back from this counter's limit for the far regions' allowances that
   * are neither spent nor revoked yet (`RegionAllowances`); absent or 0 where none are.
   */
  readonly heldBack?: number;
}

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

/**
 * Each region other than the lease region may admit one unit of a counter in a window without
 * asking the lease region: the lease item counts those units from its first write, so the
 * regions' grants never reach them, and a unit is spent or revoked, never both, by conditional
 * writes on the region's own holder item. A subject at its limit takes back the allowances no
 * region spent (`reclaim`). The bound is the limit: what the lease item granted stays below the
 * limit less the allowances not revoked, and each region spends at most its own.
 */
export interface RegionAllowances {
  /** Whether `counter` has allowances (a hybrid fixed window whose limit leaves room for them). */
  covers(counter: CounterSpec): boolean;
  /**
   * Spends this region's allowance for `counter` in the window of `now`: true when it was there
   * (neither spent by another of the region's processes nor revoked); always false in the lease
   * region.
   */
  claim(counter: CounterSpec, now: number, progress?: StoreCallProgress): Promise<boolean>;
  /**
   * Revokes the allowances of `counter` in the window of `now` that no region spent, and gives
   * them back to the lease item, with the `refund` units of the refused reservation that asked
   * (counted, admitted nowhere): resolves to the allowances given back.
   */
  reclaim(counter: CounterSpec, now: number, refund: number): Promise<number>;
  /** Takes `units` a refused reservation counted, and nobody was granted, out of the count. */
  refund(counter: CounterSpec, now: number, units: number): Promise<number>;
}

/**
 * A region's holder of reserved units, for each hybrid counter and window: an item in the
 * region's nearest replica that only this region's processes write, so that replication (last
 * writer wins) never drops one of its writes. `granted` is what this region reserved in the
 * store (`apply` of an `observe` counter) and added here; a process takes from what is `left`
 * with one conditional write, and admits from what it took. Units are never taken more than
 * once, and never for another window than the one they were granted in: a store with a holder
 * counts at the caller's stamp, and the window is the stamp's (`now`).
 */
export interface RegionHolder {
  /**
   * Takes `units` of `counter` in the window of `now`, or what is left when that is less but at
   * least `counter.cost` (as far as the server returns the item with a failed condition:
   * DynamoDB does, dynalite does not); nothing when even that is not left (or there is no item).
   * `claimAhead`: the take also claims reserving the next window ahead for the region, which
   * only the first such take of the window gets (`HolderState.claimedAhead`).
   */
  take(
    counter: CounterSpec,
    units: number,
    now: number,
    claimAhead: boolean,
    progress?: StoreCallProgress,
  ): Promise<HolderState>;
  /**
   * Adds `units` the store granted for `counter` in the window of `now`, with the store's count
   * after that grant (`storeCount`: how much of the limit every region has reserved).
   */
  fill(counter: CounterSpec, units: number, storeCount: number, now: number): Promise<HolderState>;
  /**
   * Marks the holder of `counter` in the window of `now` full, at `now`: the store refused the
   * region with nothing left to give back, so for a while the region's processes refuse the
   * subject here, one write in the region, instead of each asking the store. Optional.
   */
  markFull?(counter: CounterSpec, now: number): Promise<void>;
}

/** A region holder after a call (see `RegionHolder`). */
export interface HolderState {
  /** Units this call took (0 for `fill`). */
  readonly taken: number;
  /** Units the region was granted in the window, and has not handed to a process yet. */
  readonly granted: number;
  readonly left: number;
  /** The store's count at the holder's last fill, as `fill` was told it (0 before any). */
  readonly storeCount: number;
  /** This take was the region's first to claim reserving the next window ahead. */
  readonly claimedAhead?: boolean;
  /**
   * When the holder was last marked full (`RegionHolder.markFull`, the stamp it was marked at),
   * as far as the take could tell.
   */
  readonly fullAt?: number;
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
