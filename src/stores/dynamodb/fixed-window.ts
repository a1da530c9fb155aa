import type { WindowedState } from "../../core/algorithms/index.js";
import { ALGORITHMS } from "../../core/algorithms/index.js";
import type { CounterSpec, StoreCallProgress } from "../../core/types.js";
import { windowAt, windowSpanOf } from "../../core/windows.js";
import {
  type Attributes,
  counterAttribute,
  type ItemKey,
  numberOf,
  readItem,
  type Table,
  type WindowedOutcome,
  windowKeyAt,
} from "./items.js";
import type { AttributeValue } from "./protocol.js";

/**
 * Every fixed-window counter of one subject and one window, in one item (`PK` the subject,
 * `SK` the window, one numeric attribute per counter) and one `UpdateItem`: `ADD` returns each
 * counter's new count, which no other request saw, so each stays exact under any concurrency.
 */
export async function countFixedWindows(
  table: Table,
  specs: readonly CounterSpec[],
  now: number,
  progress?: StoreCallProgress,
): Promise<WindowedOutcome[]> {
  const first = specs[0] as CounterSpec;
  const { index, end } = windowAt(first.window, now);
  // Items are per window (the index is in the sort key): a request counted late adds to its own
  // window's item, which is still there, so it never touches a newer window's count.
  const span = windowSpanOf(first.window);
  const windowKey = windowKeyAt(first.window, now);
  const item: ItemKey = {
    PK: { S: first.subject },
    SK: { S: windowKey + table.regionSuffix },
  };
  const names: Record<string, string> = { "#ttl": "ttl" };
  const values: Record<string, AttributeValue> = {
    ":ttl": { N: String(Math.ceil(end / 1000) + table.ttlGraceSeconds) },
  };
  const additions: string[] = [];
  const sets = ["#ttl = if_not_exists(#ttl, :ttl)"];
  // Region allowances (region-allowance.ts): only where the store has them.
  const held = table.allowances?.(specs);
  const attributes = specs.map((spec, i) => {
    const attribute = counterAttribute(spec);
    names[`#c${i}`] = attribute;
    values[`:c${i}`] = { N: String(spec.cost) };
    additions.push(`#c${i} :c${i}`);
    held?.prepare(i, attribute, names, values, sets);
    return attribute;
  });
  // Only reads (cost 0: a peek): a consistent GetItem, which makes no item and costs no write.
  const increment = specs.every((spec) => spec.cost === 0)
    ? readItem(table.client, table.name, item, progress).then((found) => ({ Attributes: found }))
    : table.client.call<{ Attributes?: Attributes }>(
        "UpdateItem",
        {
          TableName: table.name,
          Key: item,
          UpdateExpression: `ADD ${additions.join(", ")} SET ${sets.join(", ")}`,
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: values,
          // What is held back, and the allowances' marks, are beside the counters: the whole item.
          ReturnValues: held === undefined ? "UPDATED_NEW" : "ALL_NEW",
        },
        { progress },
      );
  const remote = table.sums.remote(first.subject, windowKey, now, progress);
  const [answer, remoteSums] = await Promise.all([increment, remote]);
  return specs.map((spec, i) => {
    const attribute = attributes[i] as string;
    const found = answer.Attributes;
    const extra = held?.read(i, attribute, found);
    // Units held back for allowances count as counted: no region's grant ever reaches them.
    const own = numberOf(found?.[attribute]) + (extra?.held ?? 0);
    const remoteCount = remoteSums?.get(attribute) ?? 0;
    const before: WindowedState = {
      index,
      count: own - spec.cost + remoteCount,
      previous: 0,
      span,
    };
    const after: WindowedState = { index, count: own + remoteCount, previous: 0, span };
    const allowed = ALGORITHMS[spec.algorithm].allows(before, now, spec);
    const outcome: WindowedOutcome = { kind: "windowed", before, after, allowed, item, attribute };
    return extra?.heldBack === undefined ? outcome : { ...outcome, heldBack: extra.heldBack };
  });
}
