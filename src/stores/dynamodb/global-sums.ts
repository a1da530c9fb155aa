import { GenerationalCache } from "../../core/generational-cache.js";
import type { StoreCallProgress } from "../../core/types.js";
import { type Attributes, numberOf, type OtherItemsSums, readItem } from "./items.js";
import type { DynamoDbClient } from "./protocol.js";

/**
 * Counts that come from items this request does not write, cached for `cacheMs`: with Global
 * Tables, the other regions' items of the same counter and window (each region writes only its
 * own, so replication's last-writer-wins never drops an increment); and the previous window of
 * a sliding window (over every region, or the one item without Global Tables).
 */
export class GlobalSums implements OtherItemsSums {
  readonly #client: DynamoDbClient;
  readonly #table: string;
  readonly #regionSuffix: string;
  readonly #cacheMs: number;
  readonly #closed: GenerationalCache<{ sum: number; until: number }>;
  readonly #remote: GenerationalCache<{ sums: Map<string, number>; until: number }>;

  constructor(options: {
    readonly client: DynamoDbClient;
    readonly table: string;
    /** `#<region>` with Global Tables, else "". */
    readonly regionSuffix: string;
    readonly cacheMs: number;
    /** Keys per cache generation (each cache holds at most twice this). */
    readonly perGeneration: number;
  }) {
    this.#client = options.client;
    this.#table = options.table;
    this.#regionSuffix = options.regionSuffix;
    this.#cacheMs = options.cacheMs;
    // Bounded caches; see GenerationalCache for why not FIFO.
    this.#closed = new GenerationalCache(options.perGeneration);
    this.#remote = new GenerationalCache(options.perGeneration);
  }

  get global(): boolean {
    return this.#regionSuffix !== "";
  }

  /** Other regions' counts for this window, per attribute (none without Global Tables). */
  async remote(
    pk: string,
    windowKey: string,
    now: number,
    progress?: StoreCallProgress,
  ): Promise<Map<string, number> | undefined> {
    if (!this.global) return undefined;
    const cacheKey = `${pk}\u0000${windowKey}`;
    const cached = this.#remote.get(cacheKey);
    if (cached !== undefined && cached.until > now) return cached.sums;
    const sums = await this.#query(pk, windowKey, windowKey + this.#regionSuffix, progress);
    this.#remote.set(cacheKey, { sums, until: now + this.#cacheMs });
    return sums;
  }

  /** The count of a window that has ended, over every region; stragglers are negligible. */
  async closedWindow(
    key: string,
    windowKey: string,
    now: number,
    progress?: StoreCallProgress,
  ): Promise<number> {
    const cacheKey = `${key}\u0000${windowKey}\u0000closed`;
    const cached = this.#closed.get(cacheKey);
    if (cached !== undefined && cached.until > now) return cached.sum;
    let sum: number;
    if (this.global) {
      sum = (await this.#query(key, windowKey, undefined, progress)).get("count") ?? 0;
    } else {
      const item = { PK: { S: key }, SK: { S: windowKey } };
      const found = await readItem(this.#client, this.#table, item, progress);
      sum = numberOf(found?.count);
    }
    this.#closed.set(cacheKey, { sum, until: now + this.#cacheMs });
    return sum;
  }

  /** Sums every counter attribute over the regional items of one window (except `skip`). */
  async #query(
    pk: string,
    windowKey: string,
    skip: string | undefined,
    progress?: StoreCallProgress,
  ): Promise<Map<string, number>> {
    const answer = await this.#client.call<{ Items?: Attributes[] }>(
      "Query",
      {
        TableName: this.#table,
        KeyConditionExpression: "PK = :pk AND begins_with(SK, :window)",
        ExpressionAttributeValues: { ":pk": { S: pk }, ":window": { S: `${windowKey}#` } },
      },
      { progress },
    );
    const sums = new Map<string, number>();
    for (const found of answer.Items ?? []) {
      if (skip !== undefined && (found.SK as { S: string } | undefined)?.S === skip) continue;
      for (const [attribute, value] of Object.entries(found)) {
        if (attribute === "PK" || attribute === "SK" || attribute === "ttl") continue;
        sums.set(attribute, (sums.get(attribute) ?? 0) + numberOf(value));
      }
    }
    return sums;
  }
}
