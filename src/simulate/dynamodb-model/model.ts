/**
 * An in-process model of DynamoDB tables, single-region or Global Tables, that the real
 * `DynamoDbStore` (and the two-writes design's store) talk to through the simulator's transport.
 *
 * Each replica holds its own copy of each item. A write changes the local copy at once (reads
 * in that replica see it, strongly consistent or not). The new version of the whole item
 * reaches every other replica after a replication lag, and there replaces the copy it finds
 * only if its timestamp is newer: last writer wins per item, as Global Tables resolve
 * concurrent writes in their default (multi-region eventual consistency) mode. So two regions
 * that `ADD` to one shared item at once lose increments exactly as they would in AWS. Versions
 * from one replica reach another in the order they were written (replication follows the
 * item's change stream), and are applied lazily, when the item is next touched there.
 *
 * Units, per call: a write 1 write unit (items here stay under 1 KB), even when its condition
 * fails; each write also costs 1 replicated write unit in every other replica; a strongly
 * consistent read 1 read unit, an eventually consistent one 0.5 (items under 4 KB).
 */

import type { AttributeValue } from "../../stores/dynamodb/client.js";
import { DynamoDbError } from "../../stores/dynamodb/client.js";
import {
  type Attributes,
  attributeName,
  type Bindings,
  ExpressionCache,
  evaluate,
  holds,
} from "./expressions.js";
import {
  addIncrements,
  type IncrementTotals,
  type ItemRecord,
  newer,
  partitionOf,
  returned,
  text,
  type Version,
  VersionQueue,
} from "./items.js";

/** What each call cost, for the simulator's accounting. */
export interface OperationCost {
  readonly table: string;
  readonly replica: string;
  readonly operation: string;
  readonly pk: string;
  readonly readUnits: number;
  readonly writeUnits: number;
  readonly replicatedWriteUnits: number;
}

export interface TableModelOptions {
  /** Replica regions of each table: `[{ table, replicas }]`; one replica is a single-region table. */
  readonly tables: readonly {
    readonly name: string;
    readonly replicas: readonly string[];
    /** A table of this name in each replica's region, each its own: nothing replicates. */
    readonly regional?: boolean;
  }[];
  /** Replication lag, ms, for one version from `from` to `to` (drawn per version). */
  readonly lagMs: (from: string, to: string) => number;
  readonly onOperation?: (cost: OperationCost) => void;
  /**
   * How long after its `ttl` an item stays in the model (default 10 min). AWS deletes expired
   * items within days, but no store reads an expired window's item again, so the model drops
   * it sooner to bound its memory; the item still counts as one TTL delete, and its increments
   * stay in the totals.
   */
  readonly retainAfterTtlMs?: number;
}

class Table {
  readonly items = new Map<string, ItemRecord>();
  /** Items dropped after their TTL (each one TTL delete). */
  dropped = 0;
  /** Items of one partition key, for `Query` (sort keys in insertion order; sorted on read). */
  readonly byPk = new Map<string, ItemRecord[]>();
  constructor(
    readonly name: string,
    readonly replicas: readonly string[],
    readonly regional: boolean,
  ) {}
}

export class TableModel {
  readonly #tables = new Map<string, Table>();
  readonly #expressions = new ExpressionCache();
  readonly #options: TableModelOptions;
  readonly #dropped: IncrementTotals = { counted: 0, stored: 0, lost: 0 };

  constructor(options: TableModelOptions) {
    this.#options = options;
    for (const { name, replicas, regional } of options.tables)
      this.#tables.set(name, new Table(name, replicas, regional === true));
  }

  /** Runs one operation in `replica` at virtual time `now`; throws a `DynamoDbError` as DynamoDB answers. */
  execute(
    replica: string,
    operation: string,
    input: Record<string, unknown>,
    now: number,
  ): unknown {
    const tableName = String(input.TableName);
    const table = this.#tables.get(tableName);
    const at = table?.replicas.indexOf(replica) ?? -1;
    if (table === undefined || at < 0) {
      throw new DynamoDbError(
        "ResourceNotFoundException",
        400,
        `Requested resource not found: table ${tableName} in ${replica}`,
      );
    }
    switch (operation) {
      case "UpdateItem":
        return this.#update(table, at, input, now);
      case "GetItem":
        return this.#get(table, at, input, now);
      case "Query":
        return this.#query(table, at, input, now);
      case "PutItem":
        return this.#put(table, at, input, now);
      default:
        throw new DynamoDbError("UnknownOperationException", 400, `${operation} is not modeled`);
    }
  }

  /** Increments over every item, once replication has settled (lost: overwritten by a newer version). */
  incrementTotals(): IncrementTotals {
    const totals = { ...this.#dropped };
    for (const table of this.#tables.values()) {
      for (const record of table.items.values()) addIncrements(totals, record);
    }
    return totals;
  }

  /** Items ever written per table (each is deleted once by TTL; on a global table that delete replicates). */
  itemCounts(): { table: string; items: number; replicas: number }[] {
    return [...this.#tables.values()].map((table) => ({
      table: table.name,
      items: table.items.size + table.dropped,
      replicas: table.regional ? 1 : table.replicas.length,
    }));
  }

  /** Drops the items whose TTL passed `retainAfterTtlMs` before `epochMs` and that nothing is on its way to. */
  sweep(epochMs: number, now: number): void {
    const retain = this.#options.retainAfterTtlMs ?? 600_000;
    for (const table of this.#tables.values()) {
      for (const [id, record] of table.items) {
        let newest: Version | undefined;
        for (let replica = 0; replica < record.copies.length; replica++) {
          const copy = this.#copy(record, replica, now);
          if (copy !== undefined && (newest === undefined || newer(copy, newest))) newest = copy;
        }
        const ttl = newest?.attributes.ttl;
        if (ttl === undefined || !("N" in ttl) || Number(ttl.N) * 1000 + retain > epochMs) continue;
        if (record.queues?.some((queue) => queue !== undefined && queue.size > 0)) continue;
        addIncrements(this.#dropped, record);
        table.items.delete(id);
        table.dropped++;
        const siblings = table.byPk.get(record.pk);
        if (siblings !== undefined) {
          const at = siblings.indexOf(record);
          if (at >= 0) siblings.splice(at, 1);
          if (siblings.length === 0) table.byPk.delete(record.pk);
        }
      }
    }
  }

  #record(table: Table, key: Attributes, create: boolean): ItemRecord | undefined {
    const pk = text(key.PK);
    const sk = text(key.SK);
    const id = `${pk}\u0000${sk}`;
    let record = table.items.get(id);
    if (record === undefined && create) {
      const n = table.replicas.length;
      record = {
        pk,
        sk,
        keys: { PK: { S: pk }, SK: { S: sk } },
        copies: new Array(n).fill(undefined),
        queues: n > 1 && !table.regional ? new Array(n * n).fill(undefined) : undefined,
        added: new Map(),
      };
      table.items.set(id, record);
      const siblings = table.byPk.get(pk);
      if (siblings === undefined) table.byPk.set(pk, [record]);
      else siblings.push(record);
    }
    return record;
  }

  /** The copy `replica` holds at `now`, once the versions that have arrived there are applied. */
  #copy(record: ItemRecord, replica: number, now: number): Version | undefined {
    let copy = record.copies[replica];
    const queues = record.queues;
    if (queues === undefined) return copy;
    const n = record.copies.length;
    for (let origin = 0; origin < n; origin++) {
      const queue = queues[replica * n + origin];
      if (queue === undefined || queue.size === 0) continue;
      const last = queue.takeArrived(now);
      if (last !== undefined && (copy === undefined || newer(last, copy))) copy = last;
    }
    record.copies[replica] = copy;
    return copy;
  }

  #write(
    table: Table,
    record: ItemRecord,
    replica: number,
    attributes: Attributes,
    now: number,
  ): number {
    const version: Version = { attributes, stamp: now, origin: replica };
    record.copies[replica] = version;
    const queues = record.queues;
    if (queues === undefined) return 0;
    const from = table.replicas[replica] as string;
    const n = record.copies.length;
    for (let target = 0; target < n; target++) {
      if (target === replica) continue;
      let queue = queues[target * n + replica];
      if (queue === undefined) {
        queue = new VersionQueue();
        queues[target * n + replica] = queue;
      }
      // What has arrived there is applied first, so a queue holds only versions in flight.
      const arrived = queue.takeArrived(now);
      const there = record.copies[target];
      if (arrived !== undefined && (there === undefined || newer(arrived, there))) {
        record.copies[target] = arrived;
      }
      const lag = this.#options.lagMs(from, table.replicas[target] as string);
      queue.push(version, Math.max(now + lag, queue.lastArrival));
    }
    return n - 1;
  }

  #update(table: Table, replica: number, input: Record<string, unknown>, now: number): unknown {
    const key = input.Key as Attributes;
    const bindings: Bindings = {
      names: input.ExpressionAttributeNames as Record<string, string> | undefined,
      values: input.ExpressionAttributeValues as Record<string, AttributeValue> | undefined,
    };
    const record = this.#record(table, key, true) as ItemRecord;
    const old = this.#copy(record, replica, now)?.attributes;
    const condition = input.ConditionExpression as string | undefined;
    if (condition !== undefined && !holds(this.#expressions.condition(condition), old, bindings)) {
      this.#report(table, replica, "UpdateItem", record.pk, 0, 1, 0);
      const item = input.ReturnValuesOnConditionCheckFailure === "ALL_OLD" ? old : undefined;
      throw new DynamoDbError(
        "ConditionalCheckFailedException",
        400,
        "The conditional request failed",
        item,
      );
    }
    const next: Attributes =
      old === undefined
        ? { PK: key.PK as AttributeValue, SK: key.SK as AttributeValue }
        : { ...old };
    const updated: string[] = [];
    for (const action of this.#expressions.update(String(input.UpdateExpression ?? ""))) {
      const name = attributeName(action.path, bindings);
      updated.push(name);
      if (action.kind === "REMOVE") delete next[name];
      else if (action.kind === "SET") {
        const value = evaluate(action.value, old, bindings);
        if (value !== undefined) next[name] = value;
      } else {
        const amount = evaluate(action.value, old, bindings);
        const by = amount !== undefined && "N" in amount ? Number(amount.N) : 0;
        const current = old?.[name];
        next[name] = {
          N: String((current !== undefined && "N" in current ? Number(current.N) : 0) + by),
        };
        record.added.set(name, (record.added.get(name) ?? 0) + by);
      }
    }
    const replicated = this.#write(table, record, replica, next, now);
    this.#report(table, replica, "UpdateItem", record.pk, 0, 1, replicated);
    return { Attributes: returned(input.ReturnValues, old, next, updated) };
  }

  #put(table: Table, replica: number, input: Record<string, unknown>, now: number): unknown {
    const item = input.Item as Attributes;
    const record = this.#record(table, item, true) as ItemRecord;
    this.#copy(record, replica, now);
    const replicated = this.#write(table, record, replica, { ...item }, now);
    this.#report(table, replica, "PutItem", record.pk, 0, 1, replicated);
    return {};
  }

  #get(table: Table, replica: number, input: Record<string, unknown>, now: number): unknown {
    const record = this.#record(table, input.Key as Attributes, false);
    const copy = record === undefined ? undefined : this.#copy(record, replica, now);
    const units = input.ConsistentRead === true ? 1 : 0.5;
    this.#report(
      table,
      replica,
      "GetItem",
      record?.pk ?? text((input.Key as Attributes).PK),
      units,
      0,
      0,
    );
    return copy === undefined ? {} : { Item: copy.attributes };
  }

  #query(table: Table, replica: number, input: Record<string, unknown>, now: number): unknown {
    const bindings: Bindings = {
      names: input.ExpressionAttributeNames as Record<string, string> | undefined,
      values: input.ExpressionAttributeValues as Record<string, AttributeValue> | undefined,
    };
    const condition = this.#expressions.condition(String(input.KeyConditionExpression));
    const pk = partitionOf(condition, bindings);
    const found: Attributes[] = [];
    for (const record of table.byPk.get(pk) ?? []) {
      // A key condition names only the keys: tested on them before the copy is brought up to date.
      if (!holds(condition, record.keys, bindings)) continue;
      const copy = this.#copy(record, replica, now);
      if (copy !== undefined) found.push(copy.attributes);
    }
    found.sort((a, b) => (text(a.SK) < text(b.SK) ? -1 : text(a.SK) > text(b.SK) ? 1 : 0));
    this.#report(table, replica, "Query", pk, input.ConsistentRead === true ? 1 : 0.5, 0, 0);
    return { Items: found, Count: found.length };
  }

  #report(
    table: Table,
    replica: number,
    operation: string,
    pk: string,
    readUnits: number,
    writeUnits: number,
    replicatedWriteUnits: number,
  ): void {
    this.#options.onOperation?.({
      table: table.name,
      replica: table.replicas[replica] as string,
      operation,
      pk,
      readUnits,
      writeUnits,
      replicatedWriteUnits,
    });
  }
}
