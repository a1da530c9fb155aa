/**
 * The two-writes design (docs/accuracy.md defines it: the original CloudFront + DynamoDB design
 * of seed document 000, as written), behind the `Store` contract so the real engine can drive
 * it: one shared item per counter and window (no per-region items: `PK` the counter, `SK` the
 * window), one `UpdateItem` per rule, *sequential* (the path rule first, then the global rule,
 * which is not counted when the path rule refused), each region writing its nearest replica,
 * and a failed call counted as allowed (the design's `catch`: fail open). The engine runs it
 * with no block cache and no time budget (the design has neither), so blocked clients keep
 * writing. The calls are real DynamoDB JSON operations through the same transport and table
 * model as the real store's.
 */
import type { CounterSpec, CounterState, Store } from "../core/types.js";
import { windowAt } from "../core/windows.js";
import type { DynamoDbHttpClient } from "../stores/dynamodb/client.js";

const UPDATE = "ADD #c :one SET #t = if_not_exists(#t, :ttl)";
const NAMES = Object.freeze({ "#c": "count", "#t": "ttl" });

export class TwoWritesStore implements Store {
  readonly name = "two-writes-dynamodb";
  readonly #client: DynamoDbHttpClient;
  readonly #table: string;
  readonly #pathRules: ReadonlySet<string>;

  /** `pathRules`: the ids of the per-path rules, which the design checks first. */
  constructor(client: DynamoDbHttpClient, table: string, pathRules: ReadonlySet<string>) {
    this.#client = client;
    this.#table = table;
    this.#pathRules = pathRules;
  }

  async apply(counters: readonly CounterSpec[], now: number): Promise<CounterState[]> {
    const order = counters.map((_, i) => i);
    order.sort(
      (a, b) => this.#rank(counters[a] as CounterSpec) - this.#rank(counters[b] as CounterSpec),
    );
    const states: CounterState[] = new Array(counters.length);
    let refused = false;
    for (const i of order) {
      const spec = counters[i] as CounterSpec;
      const { index, end } = windowAt(spec.window, now);
      if (refused) {
        // The design returned at the first refusal: this counter was never incremented.
        states[i] = {
          allowed: true,
          count: 0,
          remaining: spec.limit,
          resetAt: end,
          retryAfterMs: 0,
        };
        continue;
      }
      let count = 0;
      let allowed = true;
      try {
        const answer = await this.#client.call<{ Attributes?: { count?: { N: string } } }>(
          "UpdateItem",
          {
            TableName: this.#table,
            Key: { PK: { S: spec.key }, SK: { S: String(index) } },
            UpdateExpression: UPDATE,
            ExpressionAttributeNames: NAMES,
            ExpressionAttributeValues: {
              ":one": { N: "1" },
              ":ttl": { N: String(Math.ceil(end / 1000) + 300) },
            },
            ReturnValues: "UPDATED_NEW",
          },
        );
        count = Number(answer.Attributes?.count?.N ?? 1);
        allowed = count <= spec.limit;
      } catch {
        // "Si DynamoDB falla, dejamos pasar" (seed 000): fail open, per call.
      }
      states[i] = {
        allowed,
        count,
        remaining: Math.max(0, spec.limit - count),
        resetAt: end,
        retryAfterMs: allowed ? 0 : end - now,
      };
      if (!allowed && spec.mode === "enforce") refused = true;
    }
    return states;
  }

  #rank(spec: CounterSpec): number {
    return this.#pathRules.has(spec.ruleId) ? 0 : 1;
  }
}
