/**
 * Global Tables' default mode as a test double between real DynamoDB-protocol servers: every
 * `lagMs`, each item that changed in one region since the last pass is copied whole to the
 * others; an item changed in more than one region is resolved last writer wins (the later
 * region's copy overwrites the other), as DynamoDB does per item.
 */
import type { DynamoDbHttpClient } from "../../src/stores/dynamodb/client.js";

export type RawItem = Record<string, { S?: string; N?: string }>;

interface Replica {
  readonly client: DynamoDbHttpClient;
  readonly seen: Map<string, string>;
}

export class Replicator {
  readonly #regions: readonly Replica[];
  readonly #table: string;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> = Promise.resolve();
  /** Items copied since start. */
  copied = 0;

  constructor(table: string, clients: readonly DynamoDbHttpClient[], lagMs: number) {
    this.#table = table;
    this.#regions = clients.map((client) => ({ client, seen: new Map() }));
    this.#timer = setInterval(() => {
      // A pass that fails (a server closing at the end of a test) is the next pass's to redo.
      this.#running = this.#running.then(() => this.pass()).catch(() => undefined);
    }, lagMs);
  }

  async pass(): Promise<void> {
    const scans = await Promise.all(this.#regions.map(({ client }) => this.#scan(client)));
    // What each region wrote itself since the last pass (not what this replicator copied in).
    const changed = this.#regions.map(({ seen }, index) => {
      const writes = new Map<string, RawItem>();
      for (const [key, item] of scans[index] as Map<string, RawItem>) {
        if (seen.get(key) !== JSON.stringify(item)) writes.set(key, item);
      }
      return writes;
    });
    const winners = new Map<string, { item: RawItem; from: number }>();
    // Last writer wins: a later region's write replaces an earlier one's for the same item.
    changed.forEach((writes, from) => {
      for (const [key, item] of writes) winners.set(key, { item, from });
    });
    for (const [key, { item, from }] of winners) {
      const text = JSON.stringify(item);
      (this.#regions[from] as Replica).seen.set(key, text);
      for (let to = 0; to < this.#regions.length; to++) {
        if (to === from) continue;
        const target = this.#regions[to] as Replica;
        await target.client.call("PutItem", { TableName: this.#table, Item: item });
        target.seen.set(key, text);
        this.copied++;
      }
    }
  }

  /** Stops the timer, then settles: two passes after the last one under way. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#running;
    await this.pass();
    await this.pass();
  }

  /** Stops the timer without settling (the servers are going away). */
  async halt(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#running;
  }

  async #scan(client: DynamoDbHttpClient): Promise<Map<string, RawItem>> {
    const answer = await client.call<{ Items: RawItem[] }>("Scan", {
      TableName: this.#table,
      ConsistentRead: true,
    });
    return new Map(answer.Items.map((item) => [`${item.PK?.S}\u0000${item.SK?.S}`, item]));
  }
}
