/**
 * A counter as the core hands it to a store (`CounterSpec`), and what the store answers for it
 * (`CounterState`): the data of the store contract (types.ts).
 */

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
