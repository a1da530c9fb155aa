import type { ItemKey } from "./items.js";
import type { AttributeValue, DynamoDbClient } from "./protocol.js";

/**
 * What a refused request took on the counters that admitted it, given back in the background:
 * one `ADD` of the negative amounts per item. Never sent twice (`resendOnStaleSocket: false`):
 * a refund applied twice would count too few; one lost leaves the count one too high until its
 * window ends (the safe direction), and is counted in `failures`.
 */
export class Refunds {
  readonly #client: DynamoDbClient;
  readonly #table: string;
  readonly #pending = new Set<Promise<void>>();
  /** Refunds that failed: counts left one too high until their window ends (safe direction). */
  failures = 0;

  constructor(client: DynamoDbClient, table: string) {
    this.#client = client;
    this.#table = table;
  }

  send(item: ItemKey, amounts: ReadonlyMap<string, number>): void {
    const names: Record<string, string> = {};
    const values: Record<string, AttributeValue> = {};
    const additions: string[] = [];
    let i = 0;
    for (const [attribute, amount] of amounts) {
      names[`#v${i}`] = attribute;
      values[`:v${i}`] = { N: String(-amount) };
      additions.push(`#v${i} :v${i}`);
      i++;
    }
    const refund = this.#client
      .call(
        "UpdateItem",
        {
          TableName: this.#table,
          Key: item,
          UpdateExpression: `ADD ${additions.join(", ")}`,
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: values,
        },
        { resendOnStaleSocket: false },
      )
      .then(
        () => undefined,
        () => {
          this.failures++;
        },
      )
      .finally(() => this.#pending.delete(refund));
    this.#pending.add(refund);
  }

  /** Resolves when every refund sent so far has landed or failed. */
  async settled(): Promise<void> {
    while (this.#pending.size > 0) await Promise.all(this.#pending);
  }
}
