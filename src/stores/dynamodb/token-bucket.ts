import { ALGORITHMS } from "../../core/algorithms/index.js";
import { EdgelimitError } from "../../core/errors.js";
import type { GenerationalCache } from "../../core/generational-cache.js";
import type { CounterSpec, StoreCallProgress } from "../../core/types.js";
import { windowLengthMs } from "../../core/windows.js";
import {
  type Attributes,
  type ItemKey,
  numberOf,
  readItem,
  type Table,
  type TokenOutcome,
} from "./items.js";
import { DynamoDbError } from "./protocol.js";

const ATTEMPTS = 4;
const EPSILON = 1e-6;

/**
 * A token bucket (GCRA) in one item per counter (`SK` `tb`), attribute `tat`: the theoretical
 * arrival time, epoch ms. A conditional `SET tat = tat + :step` when the bucket is busy, or
 * `SET tat = :fresh` when it is idle (`tat` in the past or absent), one call in the common
 * case; `hints` remembers each key's last `tat` to pick the right form first. A refused request
 * writes nothing. A lost race (the condition failed, the bucket moved) is tried again from the
 * item DynamoDB returns with the failure, up to four attempts.
 */
export async function takeTokens(
  table: Table,
  hints: GenerationalCache<number>,
  spec: CounterSpec,
  now: number,
  progress?: StoreCallProgress,
): Promise<TokenOutcome> {
  const length = windowLengthMs(spec.window, now);
  const step = (spec.cost * length) / spec.limit;
  const item: ItemKey = { PK: { S: spec.key }, SK: { S: `tb${table.regionSuffix}` } };
  // Admitted while max(tat, now) + step - now <= length, the core GCRA's test.
  const latestTat = now + length - step + EPSILON;
  const ttl = Math.ceil((now + length) / 1000) + table.ttlGraceSeconds;
  if (spec.cost === 0) {
    // A read (a peek): a consistent GetItem, nothing written.
    const current = await readItem(table.client, table.name, item, progress);
    const state = current?.tat === undefined ? undefined : { tat: numberOf(current.tat) };
    const allowed = ALGORITHMS["token-bucket"].allows(state, now, spec);
    return { kind: "token", before: state, after: state, allowed, taken: 0, item };
  }
  let hint = hints.get(spec.key);
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    if (step > length + EPSILON) break;
    const busy = hint !== undefined && hint >= now;
    try {
      const answer = await table.client.call<{ Attributes?: Attributes }>(
        "UpdateItem",
        {
          TableName: table.name,
          Key: item,
          UpdateExpression: busy
            ? "SET #tat = #tat + :step, #ttl = :ttl"
            : "SET #tat = :fresh, #ttl = :ttl",
          ConditionExpression: busy
            ? "#tat >= :now AND #tat <= :latest"
            : "attribute_not_exists(#tat) OR #tat < :now",
          ExpressionAttributeNames: { "#tat": "tat", "#ttl": "ttl" },
          ExpressionAttributeValues: busy
            ? {
                ":step": { N: String(step) },
                ":ttl": { N: String(ttl) },
                ":now": { N: String(now) },
                ":latest": { N: String(latestTat) },
              }
            : {
                ":fresh": { N: String(now + step) },
                ":ttl": { N: String(ttl) },
                ":now": { N: String(now) },
              },
          ReturnValues: "UPDATED_NEW",
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        },
        { progress },
      );
      const tat = numberOf(answer.Attributes?.tat);
      hints.set(spec.key, tat);
      return {
        kind: "token",
        before: { tat: tat - step },
        after: { tat },
        allowed: true,
        taken: step,
        item,
      };
    } catch (error) {
      if (!(error instanceof DynamoDbError) || error.type !== "ConditionalCheckFailedException") {
        throw error;
      }
      const current = error.item ?? (await readItem(table.client, table.name, item, progress));
      const tat = current?.tat === undefined ? undefined : numberOf(current.tat);
      if (tat !== undefined && tat > latestTat) {
        hints.set(spec.key, tat);
        return { kind: "token", before: { tat }, after: { tat }, allowed: false, taken: 0, item };
      }
      hint = tat;
    }
  }
  if (step > length + EPSILON) {
    // A cost above the bucket's size can never be admitted: report the bucket as it is.
    const current = await readItem(table.client, table.name, item, progress);
    const state = current?.tat === undefined ? undefined : { tat: numberOf(current.tat) };
    return { kind: "token", before: state, after: state, allowed: false, taken: 0, item };
  }
  throw new EdgelimitError(
    "EL_STORE_FAILED",
    `dynamodb: token bucket ${spec.key} kept changing under ${ATTEMPTS} attempts`,
  );
}
