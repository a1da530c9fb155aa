/** The options every DynamoDB store takes (table-store.ts counts with them). */
import type { CircuitBreakerOptions } from "../remote/breaker.js";

/** What every DynamoDB store takes, whichever client carries its calls. */
export interface DynamoDbTableOptions {
  /** Table name (default `rate-limits`): partition key `PK`, sort key `SK`, TTL attribute `ttl`. */
  readonly table?: string;
  /** The region this process writes to (with Global Tables: its nearest replica). */
  readonly region: string;
  /** A DynamoDB-protocol endpoint (`http://127.0.0.1:4567` for dynalite); default AWS's. */
  readonly endpoint?: string;
  /**
   * Global Tables: the replica regions. Each region then writes only its own item per counter
   * and window (`SK` suffixed `#<region>`) and reads the sum over regions, so replication
   * (last writer wins per item) never overwrites another region's increments.
   */
  readonly globalRegions?: readonly string[];
  /** How long other regions' counts (and closed previous windows) are reused (default 1000 ms). */
  readonly remoteCacheMs?: number;
  /** Seconds an item outlives its window before TTL may delete it (default 300, as the seed). */
  readonly ttlGraceSeconds?: number;
  /**
   * A call still unanswered this long has failed (default 3000 ms): counted from when it went
   * out on a ready socket (node:https), or from its start (`fetch`, which is then aborted).
   */
  readonly requestTimeoutMs?: number;
  /**
   * Each endpoint's circuit breaker (default: 5 consecutive failures open it for 250 ms), or
   * `false` for none. See docs/aws.md, "When DynamoDB fails".
   */
  readonly breaker?: CircuitBreakerOptions | false;
  /**
   * The known round trip to `region`'s endpoint, in ms (a Lambda@Edge region far from its
   * nearest replica); the decision budget is added to it (default 0).
   */
  readonly expectedRoundTripMs?: number;
  /** Bound of the per-instance caches (remote sums, token-bucket hints); default 10,000 keys. */
  readonly maxCachedKeys?: number;
  /**
   * Hybrid counting (`counting: hybrid`, core/hybrid-counting.ts): the region whose items hold
   * the reservations. With Global Tables the default is the first of `globalRegions`: one
   * writer per item, so replication never drops a reservation and no region admits on a sum
   * that is a second old. Without, this store's `region`.
   */
  readonly leaseRegion?: string;
  /**
   * The table for reservations (default `table`). With Global Tables, a table of its own in
   * `leaseRegion` only saves the replicated writes of every reservation (docs/accuracy.md).
   */
  readonly leaseTable?: string;
  /** `leaseRegion`'s endpoint, when it is not AWS's (a local server). Default: `endpoint` when the region is the same. */
  readonly leaseEndpoint?: string;
  /**
   * The known round trip to `leaseRegion`, in ms, added to the decision budget of a call that
   * reserves (default: `expectedRoundTripMs` when it is this store's region, else 0).
   */
  readonly leaseRoundTripMs?: number;
  /**
   * Hybrid counting's region holder (core/hybrid/holder.ts; opt-in, default false): where
   * reservations go to another region, this region's processes spend reserved units from an
   * item in the region's own replica, one local write per chunk, instead of each reserving from
   * the lease region (docs/accuracy.md, "Region holders (opt-in)"). In `leaseRegion` itself
   * processes keep reserving from the lease item directly: it is as near as a holder would be.
   */
  readonly regionHolder?: boolean;
  /**
   * The region holders' table, with `regionHolder` (default `table`): a table of this name in
   * each region, not a global table, saves the replicated writes of the holder items, which
   * only their own region ever reads.
   */
  readonly holderTable?: string;
  /**
   * Hybrid counting's region allowances (region-allowance.ts; opt-in, default false, with
   * `regionHolder` and `globalRegions`): each region but the lease region may admit one unit
   * of a counter in a window without asking the lease region, so a subject's first request in
   * a far region is answered at that region's latency. The lease item holds those units back
   * (a counter has allowances when its limit is at least their number) and a subject at its
   * limit takes back the ones no region spent. Every region's store must agree on it, and on
   * `globalRegions` and `leaseRegion`.
   */
  readonly regionAllowance?: boolean;
  /**
   * Other regions' endpoints when they are not AWS's (local servers), by region: where a
   * subject at its limit revokes their allowances (`regionAllowance`).
   */
  readonly regionEndpoints?: Readonly<Record<string, string>>;
}
