/** What the strategies share: the table they write, its item keys, and reading numbers back. */
import type { TokenBucketState, WindowedState } from "../../core/algorithms/index.js";
import type { CounterSpec, StoreCallProgress, WindowSpec } from "../../core/types.js";
import { windowAt, windowLengthMs } from "../../core/windows.js";
import type { AttributeValue, DynamoDbClient } from "./protocol.js";

/** What a write of the lease item does for the allowances of the counters it counts. */
export interface HeldBackWrite {
  /** Adds counter `i`'s units held back to the write (set by the first write of its window). */
  prepare(
    i: number,
    attribute: string,
    names: Record<string, string>,
    values: Record<string, AttributeValue>,
    sets: string[],
  ): void;
  /**
   * What the item holds back for counter `i`, to count as counted, and how many of its
   * allowances are neither spent nor revoked (`CounterState.heldBack`), where it has them.
   */
  read(
    i: number,
    attribute: string,
    item: Attributes | undefined,
  ): { readonly held: number; readonly heldBack: number | undefined };
}

export interface ItemKey {
  readonly PK: { S: string };
  readonly SK: { S: string };
}

/** Counts from items a request does not write, as a table reads them (global-sums.ts). */
export interface OtherItemsSums {
  /** Other regions' counts for this window, per attribute (none without Global Tables). */
  remote(
    pk: string,
    windowKey: string,
    now: number,
    progress?: StoreCallProgress,
  ): Promise<Map<string, number> | undefined>;
  /** The count of a window that has ended, over every region. */
  closedWindow(
    key: string,
    windowKey: string,
    now: number,
    progress?: StoreCallProgress,
  ): Promise<number>;
}

/** The table as one store instance writes it. */
export interface Table {
  readonly client: DynamoDbClient;
  readonly name: string;
  /** `#<region>` with Global Tables (each region writes its own items), else "". */
  readonly regionSuffix: string;
  /** Seconds an item outlives its window before TTL may delete it. */
  readonly ttlGraceSeconds: number;
  /** Other regions' counts and closed windows' counts, cached. */
  readonly sums: OtherItemsSums;
  /**
   * Region allowances (the lease table of a store that has them, region-allowance.ts): what a
   * write of these counters does for them, or undefined when none of them concerns them.
   */
  readonly allowances?: (specs: readonly CounterSpec[]) => HeldBackWrite | undefined;
}

/** A fixed or sliding window counter after its increment. */
export interface WindowedOutcome {
  readonly kind: "windowed";
  readonly before: WindowedState;
  readonly after: WindowedState;
  readonly allowed: boolean;
  readonly item: ItemKey;
  /** The numeric attribute holding this counter in `item`. */
  readonly attribute: string;
  /** Units still held back for regions' allowances (`Table.allowances`), where there are any. */
  readonly heldBack?: number;
}

export interface TokenOutcome {
  readonly kind: "token";
  readonly before: TokenBucketState | undefined;
  readonly after: TokenBucketState | undefined;
  readonly allowed: boolean;
  /** Tokens taken, to give back when another counter refuses (0 when nothing was written). */
  readonly taken: number;
  readonly item: ItemKey;
}

export type Outcome = WindowedOutcome | TokenOutcome;

export type Attributes = Record<string, AttributeValue>;

export function numberOf(value: AttributeValue | undefined): number {
  if (value === undefined || !("N" in value)) return 0;
  return Number(value.N);
}

export function windowLabel(window: WindowSpec): string {
  return "ms" in window ? `${window.ms}ms` : `${window.months}mo`;
}

/** The window part of a sort key: its length and epoch-aligned index (`60000ms:29512345`). */
export function windowKeyAt(window: WindowSpec, now: number): string {
  return `${windowLabel(window)}:${windowAt(window, now).index}`;
}

export function windowSeconds(window: WindowSpec, now: number): number {
  return Math.ceil(windowLengthMs(window, now) / 1000);
}

/**
 * A counter's attribute in its subject's shared item: the key without the subject (namespace
 * and scope), which always holds a `|`, so it never meets `PK`, `SK` or `ttl`.
 */
export function counterAttribute(spec: CounterSpec): string {
  const prefix = `${spec.subject}|`;
  return spec.key.startsWith(prefix) ? spec.key.slice(prefix.length) : spec.key;
}

/** A strongly consistent read of one item. */
export async function readItem(
  client: DynamoDbClient,
  tableName: string,
  item: ItemKey,
  progress?: StoreCallProgress,
): Promise<Attributes | undefined> {
  const answer = await client.call<{ Item?: Attributes }>(
    "GetItem",
    { TableName: tableName, Key: item, ConsistentRead: true },
    { progress },
  );
  return answer.Item;
}
