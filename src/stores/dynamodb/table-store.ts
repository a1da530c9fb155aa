import { ALGORITHMS } from "../../core/algorithms/index.js";
import { EdgelimitError } from "../../core/errors.js";
import { GenerationalCache } from "../../core/generational-cache.js";
import type { OverrideSource } from "../../core/overrides.js";
import type {
  CounterSpec,
  CounterState,
  RegionAllowances,
  RegionHolder,
  Store,
  StoreCallProgress,
  StoreStatus,
  StoreTraits,
} from "../../core/types.js";
import { statusOf } from "../remote/health.js";
import { countFixedWindows } from "./fixed-window.js";
import { GlobalSums } from "./global-sums.js";
import {
  type ItemKey,
  type Outcome,
  type Table,
  type WindowedOutcome,
  windowKeyAt,
} from "./items.js";
import { DynamoDbOverrides, GLOBAL_TABLES_SETTLE_MS } from "./overrides.js";
import type { DynamoDbClient } from "./protocol.js";
import { Refunds } from "./refunds.js";
import type { AllowanceSupport } from "./region-allowance.js";
import { DynamoDbRegionHolder } from "./region-holder.js";
import { countSlidingWindow } from "./sliding-window.js";
import type { DynamoDbTableOptions } from "./table-options.js";
import { takeTokens } from "./token-bucket.js";

/**
 * Makes the client of one endpoint: the store's region and `endpoint`, or (hybrid counting in
 * another region) the lease region and `leaseEndpoint`.
 */
export type ClientFactory<C extends DynamoDbClient> = (
  region: string,
  endpoint: string | undefined,
) => C;

const DEFAULT_TABLE = "rate-limits";

/**
 * Counters in DynamoDB. The fixed-window counters of one subject and one window share an item
 * (fixed-window.ts): a request's path rule and global rule are one `UpdateItem`, one write
 * unit. Sliding windows keep one item per counter and window (sliding-window.ts), token buckets
 * one item per counter with a conditional write (token-bucket.ts). With Global Tables each
 * region writes its own items and adds the others' counts (global-sums.ts).
 *
 * One request is one round of parallel calls, one per item (items cannot be updated together
 * without a transaction at twice the price). Admission is optimistic: every counter is
 * incremented, each increment returns a count no other request saw, so a single counter never
 * admits more than its limit under any concurrency. When one counter refuses, the increments on
 * the counters that would have admitted are given back in the background (refunds.ts), so
 * quotas the request never used are not spent; until that refund lands a concurrent request
 * may be refused by a count that is briefly one too high (never admitted by one too low). Items
 * are never trusted for being there: an item's window is in its key, and a token bucket's `tat`
 * in the past means idle, so an expired item that TTL has not deleted yet reads as what it is.
 * See docs/aws.md for the full trade-off.
 *
 * How a call travels is the client's (`DynamoDbStore`: node:https; `DynamoDbFetchStore`:
 * `fetch`); everything that counts is here, so both count the same items the same way.
 */
export class DynamoDbTableStore<C extends DynamoDbClient> implements Store {
  readonly name: string = "dynamodb";
  readonly traits: StoreTraits;
  readonly table: string;
  readonly region: string;
  readonly client: C;
  readonly expectedRoundTripMs: number;
  readonly leaseRegion: string;
  readonly leaseRoundTripMs: number;
  readonly holder: RegionHolder | undefined;
  readonly allowances: RegionAllowances | undefined;
  /**
   * Operators' overrides in this table (overrides.ts); none in the Lambda@Edge bundles (they
   * bring their own, adapters/lambda-edge/overrides.ts). On Workers (`requestScopedIo`) a
   * limiter's requests refresh its copy, not a timer (limiter.ts).
   */
  readonly overrides: (() => OverrideSource) | undefined;
  readonly #table: Table;
  /** Where hybrid counters are counted: `#table` itself unless a lease region or table is set. */
  readonly #leases: Table;
  readonly #tatHints: GenerationalCache<number>;
  readonly #refunds: Refunds;
  readonly #leaseRefunds: Refunds;
  /** Closes the clients the region allowances opened to other regions. */
  readonly #closeAllowances: (() => void) | undefined;

  /** `owner` names the store in option errors (`dynamodbStore`). */
  /**
   * `allowanceSupport` makes the region allowances where `regionAllowance` asks for them: the
   * Node store's (region-allowance.ts); a store without it refuses the option.
   */
  constructor(
    options: DynamoDbTableOptions,
    connect: ClientFactory<C>,
    owner: string,
    requestScopedIo = false,
    allowanceSupport?: AllowanceSupport,
  ) {
    this.traits = {
      requestScopedIo,
      roundTripMs: (counters) => this.roundTripMs(counters),
      status: () => this.status(),
    };
    if (typeof options.region !== "string" || options.region === "") {
      throw new EdgelimitError(
        "EL_STORE_OPTION",
        `${owner}: region is required (for example eu-west-1)`,
      );
    }
    this.table = options.table ?? DEFAULT_TABLE;
    this.region = options.region;
    const roundTrip = checkedRoundTrip(
      options.expectedRoundTripMs ?? 0,
      "expectedRoundTripMs",
      owner,
    );
    this.expectedRoundTripMs = roundTrip;
    this.client = connect(options.region, options.endpoint);
    const regions = options.globalRegions ?? [];
    if (regions.length > 0 && !regions.includes(options.region)) {
      throw new EdgelimitError(
        "EL_STORE_OPTION",
        `${owner}: region ${options.region} is not one of globalRegions (${regions.join(", ")})`,
      );
    }
    const regionSuffix = regions.length > 0 ? `#${options.region}` : "";
    // Bounded caches (at most maxCachedKeys each); see GenerationalCache for why not FIFO.
    const perGeneration = Math.max(1, Math.floor((options.maxCachedKeys ?? 10_000) / 2));
    this.#table = {
      client: this.client,
      name: this.table,
      regionSuffix,
      ttlGraceSeconds: options.ttlGraceSeconds ?? 300,
      sums: new GlobalSums({
        client: this.client,
        table: this.table,
        regionSuffix,
        cacheMs: options.remoteCacheMs ?? 1000,
        perGeneration,
      }),
    };
    this.#tatHints = new GenerationalCache(perGeneration);
    this.leaseRegion = options.leaseRegion ?? regions[0] ?? options.region;
    const leaseTable = options.leaseTable ?? this.table;
    const sameRegion = this.leaseRegion === options.region;
    this.leaseRoundTripMs = checkedRoundTrip(
      options.leaseRoundTripMs ?? (sameRegion ? roundTrip : 0),
      "leaseRoundTripMs",
      owner,
    );
    if (sameRegion && regionSuffix === "" && leaseTable === this.table) this.#leases = this.#table;
    else {
      const client = sameRegion ? this.client : connect(this.leaseRegion, options.leaseEndpoint);
      // One writer per reservation item: no region suffix, nothing to add from other regions.
      this.#leases = {
        client,
        name: leaseTable,
        regionSuffix: "",
        ttlGraceSeconds: this.#table.ttlGraceSeconds,
        sums: new GlobalSums({
          client,
          table: leaseTable,
          regionSuffix: "",
          cacheMs: options.remoteCacheMs ?? 1000,
          perGeneration,
        }),
      };
    }
    if (options.holderTable !== undefined && options.regionHolder !== true) {
      throw new EdgelimitError(
        "EL_STORE_OPTION",
        `${owner}: holderTable names the region holders' table; set regionHolder: true to use them`,
      );
    }
    // In the lease region the lease item is local already: a holder would only add a write.
    this.holder =
      options.regionHolder === true && !sameRegion
        ? new DynamoDbRegionHolder(
            this.client,
            options.holderTable ?? this.table,
            this.#table.ttlGraceSeconds,
            options.region,
          )
        : undefined;
    if (options.regionEndpoints !== undefined && options.regionAllowance !== true) {
      throw new EdgelimitError("EL_STORE_OPTION", `${owner}: regionEndpoints need regionAllowance`);
    }
    const attached =
      options.regionAllowance === true
        ? allowanceSupport?.attach({
            options,
            leaseRegion: this.leaseRegion,
            owner,
            leases: this.#leases,
            holderTable: options.holderTable ?? this.table,
            ttlGraceSeconds: this.#table.ttlGraceSeconds,
            client: this.client,
            connect,
          })
        : undefined;
    if (options.regionAllowance === true && attached === undefined) {
      throw new EdgelimitError("EL_STORE_OPTION", `${owner}: regionAllowance is dynamodbStore's`);
    }
    // The lease items hold the allowances back (fixed-window.ts).
    if (attached !== undefined) this.#leases = { ...this.#leases, allowances: attached.write };
    this.allowances = attached?.allowances;
    this.#closeAllowances = attached?.close;
    this.overrides =
      typeof EDGELIMIT_BUNDLE === "undefined"
        ? () =>
            new DynamoDbOverrides(this.client, this.table, {
              settleMs: regions.length > 0 ? GLOBAL_TABLES_SETTLE_MS : 0,
            })
        : undefined;
    this.#refunds = new Refunds(this.client, this.table);
    this.#leaseRefunds =
      this.#leases === this.#table
        ? this.#refunds
        : new Refunds(this.#leases.client, this.#leases.name);
  }

  /**
   * The known round trip of a call with these counters: hybrid reservations go to the lease
   * region, which may be farther than this store's own replica (`StoreTraits.roundTripMs`).
   */
  roundTripMs(counters: readonly CounterSpec[]): number {
    return counters.some(isHybrid) ? this.leaseRoundTripMs : this.expectedRoundTripMs;
  }

  /** This region's client, and the lease region's when it has its own. */
  protected get clients(): readonly C[] {
    const leases = this.#leases.client as C;
    return leases === this.client ? [this.client] : [this.client, leases];
  }

  /** Both endpoints' calls (this region's, and the lease region's when it has its own client). */
  status(): StoreStatus {
    return statusOf(this.clients.map((client) => client.guard));
  }

  /** Refunds that failed: counts left one too high until their window ends (safe direction). */
  get refundFailures(): number {
    const leases = this.#leaseRefunds === this.#refunds ? 0 : this.#leaseRefunds.failures;
    return this.#refunds.failures + leases;
  }

  async apply(
    counters: readonly CounterSpec[],
    now: number,
    progress?: StoreCallProgress,
  ): Promise<CounterState[]> {
    const outcomes = await this.#count(counters, now, progress);
    let admitted = true;
    for (let i = 0; i < counters.length; i++) {
      if ((counters[i] as CounterSpec).mode === "enforce" && !(outcomes[i] as Outcome).allowed) {
        admitted = false;
      }
    }
    const states: CounterState[] = [];
    const refunds = new Map<
      string,
      { item: ItemKey; amounts: Map<string, number>; via: Refunds }
    >();
    for (let i = 0; i < counters.length; i++) {
      const spec = counters[i] as CounterSpec;
      const outcome = outcomes[i] as Outcome;
      const refund = !admitted && spec.mode === "enforce" && outcome.allowed;
      if (refund) {
        const amount = outcome.kind === "windowed" ? spec.cost : outcome.taken;
        const attribute = outcome.kind === "windowed" ? outcome.attribute : "tat";
        if (amount !== 0) {
          const via = isHybrid(spec) ? this.#leaseRefunds : this.#refunds;
          const itemId = `${via === this.#refunds}\u0000${outcome.item.PK.S}\u0000${outcome.item.SK.S}`;
          let pending = refunds.get(itemId);
          if (pending === undefined) {
            pending = { item: outcome.item, amounts: new Map(), via };
            refunds.set(itemId, pending);
          }
          pending.amounts.set(attribute, (pending.amounts.get(attribute) ?? 0) + amount);
        }
      }
      const algorithm = ALGORITHMS[spec.algorithm];
      const state = algorithm.describe(
        refund ? outcome.before : outcome.after,
        now,
        spec,
        outcome.allowed,
      );
      const heldBack = outcome.kind === "windowed" ? (outcome.heldBack ?? 0) : 0;
      states.push(heldBack === 0 ? state : { ...state, heldBack });
    }
    for (const { item, amounts, via } of refunds.values()) via.send(item, amounts);
    return states;
  }

  /** Every counter counted, in one round of parallel calls: one per item. */
  async #count(
    counters: readonly CounterSpec[],
    now: number,
    progress?: StoreCallProgress,
  ): Promise<Outcome[]> {
    const outcomes: Outcome[] = new Array(counters.length);
    const calls: Promise<void>[] = [];
    // Fixed windows of one subject and one window share an item: one UpdateItem for them all.
    const shared = new Map<string, number[]>();
    counters.forEach((spec, i) => {
      const table = isHybrid(spec) ? this.#leases : this.#table;
      if (spec.algorithm === "fixed-window") {
        const group = `${spec.counting ?? "exact"}\u0000${spec.subject}\u0000${windowKeyAt(spec.window, now)}`;
        const members = shared.get(group);
        if (members === undefined) shared.set(group, [i]);
        else members.push(i);
        return;
      }
      const pending =
        spec.algorithm === "token-bucket"
          ? takeTokens(table, this.#tatHints, spec, now, progress)
          : countSlidingWindow(table, spec, now, progress);
      calls.push(
        pending.then((outcome) => {
          outcomes[i] = outcome;
        }),
      );
    });
    for (const members of shared.values()) {
      const specs = members.map((i) => counters[i] as CounterSpec);
      const table = isHybrid(specs[0] as CounterSpec) ? this.#leases : this.#table;
      calls.push(
        countFixedWindows(table, specs, now, progress).then((found) => {
          members.forEach((i, j) => {
            outcomes[i] = found[j] as WindowedOutcome;
          });
        }),
      );
    }
    await Promise.all(calls);
    return outcomes;
  }

  /** Resolves when every background refund has landed (tests, and before a process exits). */
  async settled(): Promise<void> {
    await Promise.all([this.#refunds.settled(), this.#leaseRefunds.settled()]);
  }

  async close(): Promise<void> {
    await this.settled();
    for (const client of this.clients) client.close();
    this.#closeAllowances?.();
  }
}

function isHybrid(spec: CounterSpec): boolean {
  return spec.counting === "hybrid";
}

function checkedRoundTrip(ms: number, name: string, owner: string): number {
  if (!Number.isFinite(ms) || ms < 0) {
    throw new EdgelimitError(
      "EL_STORE_OPTION",
      `${owner}: ${name} must be 0 or more milliseconds; got ${ms}`,
    );
  }
  return ms;
}
