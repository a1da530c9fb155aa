/** The table model's items: their versions in each replica, and the helpers that read them. */
import type { AttributeValue } from "../../stores/dynamodb/client.js";
import { DynamoDbError } from "../../stores/dynamodb/client.js";
import { type Attributes, type Bindings, type Condition, evaluate } from "./expressions.js";

export interface Version {
  readonly attributes: Attributes;
  /** Virtual time of the write, ms; ties go to the replica listed first. */
  readonly stamp: number;
  readonly origin: number;
}

/**
 * The versions of one item on their way from one replica to another, oldest first (they are
 * sent, and arrive, in the order they were written). A head index instead of shifting, and
 * arrival times beside the versions, so a busy item's queue costs no copy per write.
 */
export class VersionQueue {
  readonly #versions: Version[] = [];
  readonly #arrives: number[] = [];
  #head = 0;

  get size(): number {
    return this.#versions.length - this.#head;
  }

  /** When the newest version in flight arrives (0 when none is). */
  get lastArrival(): number {
    return this.size === 0 ? 0 : (this.#arrives[this.#arrives.length - 1] as number);
  }

  push(version: Version, arrives: number): void {
    this.#versions.push(version);
    this.#arrives.push(arrives);
  }

  /** Removes the versions that have arrived by `now`; returns the newest of them. */
  takeArrived(now: number): Version | undefined {
    const versions = this.#versions;
    const arrives = this.#arrives;
    let head = this.#head;
    let last: Version | undefined;
    while (head < versions.length && (arrives[head] as number) <= now) last = versions[head++];
    if (head >= 64 && head * 2 >= versions.length) {
      versions.splice(0, head);
      arrives.splice(0, head);
      head = 0;
    }
    this.#head = head;
    return last;
  }

  /** The versions still in flight. */
  inFlight(): Version[] {
    return this.#versions.slice(this.#head);
  }
}

/** One item, in every replica of its table. */
export interface ItemRecord {
  readonly pk: string;
  readonly sk: string;
  /** `PK` and `SK` as attributes, for key conditions. */
  readonly keys: Attributes;
  readonly copies: (Version | undefined)[];
  /** `queues[target * replicas + origin]`: versions on their way, oldest first (made on first use). */
  readonly queues: (VersionQueue | undefined)[] | undefined;
  /** Net amounts each attribute was ADDed by, over every replica (the increments counted). */
  readonly added: Map<string, number>;
}

/** Increments counted in any replica against what the newest version of each item holds. */
export interface IncrementTotals {
  counted: number;
  stored: number;
  lost: number;
}

/** Adds one item's increments, with replication settled, to `totals`. */
export function addIncrements(totals: IncrementTotals, record: ItemRecord): void {
  if (record.added.size === 0) return;
  let newest: Version | undefined;
  for (const copy of record.copies) {
    if (copy !== undefined && (newest === undefined || newer(copy, newest))) newest = copy;
  }
  for (const queue of record.queues ?? []) {
    for (const pending of queue?.inFlight() ?? [])
      if (newest === undefined || newer(pending, newest)) newest = pending;
  }
  for (const [attribute, counted] of record.added) {
    const value = newest?.attributes[attribute];
    const stored = value !== undefined && "N" in value ? Number(value.N) : 0;
    totals.counted += counted;
    totals.stored += stored;
    totals.lost += Math.max(0, counted - stored);
  }
}

export function newer(a: Version, b: Version): boolean {
  return a.stamp > b.stamp || (a.stamp === b.stamp && a.origin < b.origin);
}

export function text(value: AttributeValue | undefined): string {
  if (value === undefined)
    throw new DynamoDbError(
      "ValidationException",
      400,
      "The provided key element does not match the schema",
    );
  return "S" in value ? value.S : value.N;
}

/** The partition key a key condition names (`PK = :pk AND ...`). */
export function partitionOf(condition: Condition, bindings: Bindings): string {
  if (condition.kind === "and") return partitionOf(condition.left, bindings);
  if (condition.kind === "compare" && condition.op === "=") {
    const value = evaluate(condition.right, undefined, bindings);
    if (value !== undefined) return text(value);
  }
  throw new DynamoDbError(
    "ValidationException",
    400,
    "Query key condition must name the partition key with =",
  );
}

export function returned(
  mode: unknown,
  old: Attributes | undefined,
  next: Attributes,
  updated: readonly string[],
): Attributes | undefined {
  if (mode === "ALL_NEW") return next;
  if (mode === "ALL_OLD") return old;
  if (mode === "UPDATED_NEW" || mode === "UPDATED_OLD") {
    const source = mode === "UPDATED_NEW" ? next : old;
    if (source === undefined) return undefined;
    const out: Attributes = {};
    for (const name of updated) {
      const value = source[name];
      if (value !== undefined) out[name] = value;
    }
    return out;
  }
  return undefined;
}
