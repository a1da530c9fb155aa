/**
 * What a store with regions offers hybrid counting besides `apply` (`Store.holder`,
 * `Store.allowances` in types.ts): a region's holder of reserved units and its allowances.
 * DynamoDB (stores/dynamodb/) and a Worker's area object (adapters/cloudflare/area-object.ts)
 * implement both; hybrid/holder.ts and hybrid/allowance.ts use them.
 */
import type { CounterSpec } from "../counter-spec.js";
import type { StoreCallProgress } from "../deadline.js";

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
