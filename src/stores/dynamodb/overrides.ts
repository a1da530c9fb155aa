/**
 * Overrides in DynamoDB, for the DynamoDB stores' `overrides()`: items in the counters' table
 * under the partition key `{overrides}`, which no counter can have (a counter's `PK` begins with
 * its subject, `ip:…`, `user:…`, `key:…`, where braces are escaped; core/keys.ts):
 *
 * - `SK` `version`: the token of the last change (`token`), when it was made (`at`) and the
 *   change count (`seq`). A limiter's background read is one strongly consistent `GetItem` of
 *   it: a few dozen bytes, one read unit. A random token rather than a counter: with Global
 *   Tables two regions' increments may replicate as one (last writer wins), two tokens never.
 * - `SK` `shard#00`…`shard#31`: the overrides, one string attribute per subject and scope
 *   (`<subject> <scope>`, which holds a space, so never `PK` or `SK`) holding its JSON, in the
 *   shard of a hash of that name. Sharded because an item holds at most 400 KB: 32 items hold
 *   10,000 overrides of up to ~1.2 KB each (a typical one takes 160 bytes, a 500-character
 *   subject, note and reason ~2.2 KB). A write that would pass an item's size is refused as
 *   `EL_OVERRIDE_FULL`. `list` is one `BatchGetItem`.
 * - `SK` `log#0000`…`log#0999`: the change log, a ring of OVERRIDE_LOG_SIZE small items (slot
 *   `seq` modulo the size), so no item grows with it; `changes` is one `Query`.
 *
 * A change is three writes in order, shard, version, log (dynalite, the test server, has no
 * `TransactWriteItems`, and the version's `seq` names the log slot): a failure before the
 * version write rejects, and the change may be stored but unseen elsewhere until the next one.
 * With Global Tables items replicate one by one in no set order, so a region may see the new
 * version before the shard it announces: for `settleMs` after a change `version` reads as
 * changed at every refresh, so the shard is read again once it has arrived.
 */
import { EdgelimitError } from "../../core/errors.js";
import {
  OVERRIDE_LOG_SIZE,
  type Override,
  type OverrideChange,
  type OverrideSource,
} from "../../core/overrides.js";
import { fieldOf, full, setChange } from "../memory-overrides.js";
import { type Attributes, type ItemKey, numberOf } from "./items.js";
import { type AttributeValue, type DynamoDbClient, DynamoDbError } from "./protocol.js";

/** The partition key of every override item: braces never occur in a counter's subject. */
export const OVERRIDES_PK = "{overrides}";
/** Items the overrides are spread over (400 KB each at most). */
export const OVERRIDE_SHARDS = 32;
/** With Global Tables, how long after a change `version` reads as changed (see above). */
export const GLOBAL_TABLES_SETTLE_MS = 60_000;
/** Prunes of expired overrides in flight at once when the store is full. */
const PRUNE_CONCURRENCY = 16;

export interface DynamoDbOverridesOptions {
  /**
   * How long after a change `version` reads as changed at every refresh (default 0; the
   * DynamoDB stores pass GLOBAL_TABLES_SETTLE_MS with Global Tables: replication lag, and
   * clock skew between regions, well within it).
   */
  readonly settleMs?: number;
  /** The clock `settleMs` is read on (default `Date.now`). */
  readonly clock?: () => number;
}

export class DynamoDbOverrides implements OverrideSource {
  readonly name = "dynamodb";
  readonly #client: DynamoDbClient;
  readonly #table: string;
  readonly #settleMs: number;
  readonly #clock: () => number;

  constructor(client: DynamoDbClient, table: string, options: DynamoDbOverridesOptions = {}) {
    this.#client = client;
    this.#table = table;
    this.#settleMs = options.settleMs ?? 0;
    this.#clock = options.clock ?? Date.now;
  }

  async version(): Promise<string> {
    const answer = await this.#client.call<{ Item?: Attributes }>("GetItem", {
      TableName: this.#table,
      Key: key("version"),
      ConsistentRead: true,
    });
    const token = stringOf(answer.Item?.token);
    if (token === undefined) return "none";
    const now = this.#clock();
    return now - numberOf(answer.Item?.at) < this.#settleMs ? `${token}@${now}` : token;
  }

  async list(): Promise<readonly Override[]> {
    return (await this.#held()).map((held) => held.override);
  }

  async put(override: Override, now: number, max: number): Promise<void> {
    const field = fieldOf(override.subject, override.scope);
    const held = await this.#held();
    if (!held.some((entry) => entry.field === field) && held.length >= max) {
      const expired = held.filter(
        ({ override: kept }) => kept.until !== undefined && kept.until <= now,
      );
      await this.#prune(expired);
      if (held.length - expired.length >= max) throw full(max);
    }
    try {
      await this.#client.call("UpdateItem", {
        TableName: this.#table,
        Key: key(shardOf(field)),
        UpdateExpression: "SET #f = :v",
        ExpressionAttributeNames: { "#f": field },
        ExpressionAttributeValues: { ":v": { S: JSON.stringify(override) } },
      });
    } catch (error) {
      if (error instanceof DynamoDbError && /maximum allowed size/i.test(error.message)) {
        throw new EdgelimitError(
          "EL_OVERRIDE_FULL",
          `the DynamoDB item holding ${override.subject}'s overrides (${shardOf(field)}) is at its 400 KB bound; remove some overrides, or shorten notes and reasons, before setting more`,
        );
      }
      throw error;
    }
    await this.#changed(setChange(override), now);
  }

  async delete(subject: string, scope: string, change: OverrideChange): Promise<boolean> {
    const field = fieldOf(subject, scope);
    try {
      await this.#client.call("UpdateItem", {
        TableName: this.#table,
        Key: key(shardOf(field)),
        UpdateExpression: "REMOVE #f",
        ConditionExpression: "attribute_exists(#f)",
        ExpressionAttributeNames: { "#f": field },
      });
    } catch (error) {
      if (isConditionFailure(error)) return false;
      throw error;
    }
    await this.#changed(change, change.at);
    return true;
  }

  async changes(count: number): Promise<readonly OverrideChange[]> {
    if (count <= 0) return [];
    const found: { seq: number; change: OverrideChange }[] = [];
    let start: Attributes | undefined;
    do {
      const page: { Items?: Attributes[]; LastEvaluatedKey?: Attributes } = await this.#client.call(
        "Query",
        {
          TableName: this.#table,
          KeyConditionExpression: "PK = :pk AND begins_with(SK, :log)",
          ExpressionAttributeValues: { ":pk": { S: OVERRIDES_PK }, ":log": { S: "log#" } },
          ConsistentRead: true,
          ...(start === undefined ? {} : { ExclusiveStartKey: start }),
        },
      );
      for (const item of page.Items ?? []) {
        const change = parse<OverrideChange>(stringOf(item.change));
        if (change !== undefined) found.push({ seq: numberOf(item.seq), change });
      }
      start = page.LastEvaluatedKey;
    } while (start !== undefined);
    found.sort((a, b) => a.seq - b.seq);
    return found.slice(-count).map((entry) => entry.change);
  }

  /** Every stored override with its attribute name, read from all shards. */
  async #held(): Promise<{ field: string; override: Override }[]> {
    let keys: ItemKey[] = Array.from({ length: OVERRIDE_SHARDS }, (_, i) => key(shardName(i)));
    const held: { field: string; override: Override }[] = [];
    // An answer over 16 MB comes back in parts: the rest as UnprocessedKeys.
    for (let round = 0; keys.length > 0; round++) {
      if (round > 0)
        await new Promise((resolve) => setTimeout(resolve, Math.min(1000, 25 * round)));
      if (round > 20) {
        throw new EdgelimitError("EL_STORE_FAILED", "DynamoDB kept overrides' shards unprocessed");
      }
      const answer = await this.#client.call<{
        Responses?: Record<string, Attributes[]>;
        UnprocessedKeys?: Record<string, { Keys?: ItemKey[] }>;
      }>("BatchGetItem", {
        RequestItems: { [this.#table]: { Keys: keys, ConsistentRead: true } },
      });
      for (const item of answer.Responses?.[this.#table] ?? []) {
        for (const [field, value] of Object.entries(item)) {
          if (!field.includes(" ")) continue;
          const override = parseOverride(stringOf(value));
          if (override !== undefined) held.push({ field, override });
        }
      }
      keys = answer.UnprocessedKeys?.[this.#table]?.Keys ?? [];
    }
    return held;
  }

  /** Removes expired overrides, each only if unchanged since it was read. */
  async #prune(expired: readonly { field: string; override: Override }[]): Promise<void> {
    for (let i = 0; i < expired.length; i += PRUNE_CONCURRENCY) {
      await Promise.all(
        expired.slice(i, i + PRUNE_CONCURRENCY).map(async ({ field, override }) => {
          try {
            await this.#client.call("UpdateItem", {
              TableName: this.#table,
              Key: key(shardOf(field)),
              UpdateExpression: "REMOVE #f",
              ConditionExpression: "#f = :v",
              ExpressionAttributeNames: { "#f": field },
              ExpressionAttributeValues: { ":v": { S: JSON.stringify(override) } },
            });
          } catch (error) {
            if (!isConditionFailure(error)) throw error;
          }
        }),
      );
    }
  }

  /** The version moves (every reader will list again), then the change is logged. */
  async #changed(change: OverrideChange, now: number): Promise<void> {
    const token = `${now}.${Math.random().toString(36).slice(2)}`;
    const answer = await this.#client.call<{ Attributes?: Attributes }>("UpdateItem", {
      TableName: this.#table,
      Key: key("version"),
      UpdateExpression: "SET #t = :t, #at = :at ADD #seq :one",
      ExpressionAttributeNames: { "#t": "token", "#at": "at", "#seq": "seq" },
      ExpressionAttributeValues: {
        ":t": { S: token },
        ":at": { N: String(now) },
        ":one": { N: "1" },
      },
      ReturnValues: "UPDATED_NEW",
    });
    const seq = numberOf(answer.Attributes?.seq);
    await this.#client.call("PutItem", {
      TableName: this.#table,
      Item: {
        ...key(`log#${String(seq % OVERRIDE_LOG_SIZE).padStart(4, "0")}`),
        seq: { N: String(seq) },
        change: { S: JSON.stringify(change) },
      },
    });
  }
}

function key(sk: string): ItemKey {
  return { PK: { S: OVERRIDES_PK }, SK: { S: sk } };
}

function shardName(index: number): string {
  return `shard#${String(index).padStart(2, "0")}`;
}

/** The shard of an override's attribute: FNV-1a over its UTF-16 code units, the same everywhere. */
export function shardOf(field: string): string {
  let hash = 0x811c9dc5;
  for (let i = 0; i < field.length; i++) {
    hash ^= field.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return shardName(hash % OVERRIDE_SHARDS);
}

function stringOf(value: AttributeValue | undefined): string | undefined {
  return value !== undefined && "S" in value ? value.S : undefined;
}

function isConditionFailure(error: unknown): boolean {
  return error instanceof DynamoDbError && error.type === "ConditionalCheckFailedException";
}

function parse<T>(text: string | undefined): T | undefined {
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text) as T;
  } catch {
    return undefined;
  }
}

/** A stored override, or undefined for an attribute that is not one (written by hand, damaged). */
function parseOverride(text: string | undefined): Override | undefined {
  const override = parse<Override>(text);
  if (override === null || typeof override !== "object") return undefined;
  if (
    typeof override.subject !== "string" ||
    !["limit", "block", "allow"].includes(override.effect)
  )
    return undefined;
  return override;
}
