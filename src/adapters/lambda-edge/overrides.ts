/**
 * Operators' overrides for the viewer-request function (docs/overrides.md, "Lambda@Edge"): the
 * `overrides` option of `createViewerRequestHandler`, read from the DynamoDB table the function
 * counts in (the items `edgelimit override set --store dynamodb://TABLE` writes; with Global
 * Tables, the replica it writes to).
 *
 * A frozen Lambda instance runs nothing between invocations, so no timer refreshes them: each
 * request that finds the snapshot `refreshMs` old starts a read beside itself (one `GetItem` of
 * the version; the `BatchGetItem` of the shards only when it moved), never waited for. The
 * first read starts when the handler is made (at init in the bundle, overlapping the cold
 * start), and an instance's first requests wait for it at most `firstWaitMs`.
 *
 * In the bundle this is a file of its own, `overrides.js`, required at init only when the
 * build turns overrides on: the watch, the snapshot's index and the DynamoDB source stay out
 * of `index.js`, whose size is bounded (docs/aws.md).
 */
import type { ResolvedPolicy } from "../../core/model.js";
import { checkOptions, type OptionsShape, POLICY, required } from "../../core/options.js";
import { OverrideWatch } from "../../core/override-watch.js";
import { DEFAULT_OVERRIDE_REFRESH_MS } from "../../core/overrides.js";
import type { LimiterOptions } from "../../limiter.js";
import { DynamoDbOverrides, GLOBAL_TABLES_SETTLE_MS } from "../../stores/dynamodb/overrides.js";
import type { DynamoDbClient } from "../../stores/dynamodb/protocol.js";

/** The DynamoDB store the function counts in (a `DynamoDbStore`, not its hybrid wrapper). */
export interface EdgeOverridesStore {
  readonly client: DynamoDbClient;
  readonly table: string;
  /** The round trip to the replica it writes to (`bundledStoreOptions`; 0 in its region). */
  readonly expectedRoundTripMs: number;
}

export interface EdgeOverridesOptions {
  /** The policy the function decides by: its budget bounds the first requests' wait. */
  readonly policy: ResolvedPolicy;
  /** Whether the table has replicas: a region may then see a version before its shard. */
  readonly globalTables?: boolean;
  /** How old a snapshot may be before a request refreshes it (default 5 s: the bound). */
  readonly refreshMs?: number;
  /**
   * Longest an instance's first requests wait for its first read (default: the policy's
   * budget plus two round trips to the replica, one for the version and one for the shards).
   */
  readonly firstWaitMs?: number;
}

function edgeOverridesShape() {
  return {
    policy: required(POLICY),
    globalTables: "boolean",
    refreshMs: "number",
    firstWaitMs: "number",
  } satisfies OptionsShape<EdgeOverridesOptions>;
}

/** The `overrides` option of `createViewerRequestHandler` (and `createLimiter`) for `store`. */
export function edgeOverrides(
  store: EdgeOverridesStore,
  options: EdgeOverridesOptions,
): Exclude<LimiterOptions["overrides"], false | undefined> {
  if (typeof EDGELIMIT_BUNDLE === "undefined")
    checkOptions("edgeOverrides", options, edgeOverridesShape());
  const settleMs = options.globalTables === true ? GLOBAL_TABLES_SETTLE_MS : 0;
  return {
    refreshMs:
      options.refreshMs ?? options.policy.overrides?.refreshMs ?? DEFAULT_OVERRIDE_REFRESH_MS,
    onRequest: {
      firstWaitMs: options.firstWaitMs ?? options.policy.budgetMs + 2 * store.expectedRoundTripMs,
    },
    watch: (watchOptions) =>
      new OverrideWatch(
        new DynamoDbOverrides(store.client, store.table, { settleMs }),
        watchOptions,
      ),
  };
}
