import type { WindowedState } from "../../core/algorithms/index.js";
import { ALGORITHMS } from "../../core/algorithms/index.js";
import type { CounterSpec, StoreCallProgress } from "../../core/types.js";
import { windowAt, windowSpanOf } from "../../core/windows.js";
import {
  type Attributes,
  type ItemKey,
  numberOf,
  readItem,
  type Table,
  type WindowedOutcome,
  windowLabel,
  windowSeconds,
} from "./items.js";

/**
 * A sliding window keeps one item per counter and window (`PK` the counter key, attribute
 * `count`), so the previous window reads alone; its count is cached once the window is closed.
 * The item lives one window longer than a fixed window's, since the next window reads it.
 */
export async function countSlidingWindow(
  table: Table,
  spec: CounterSpec,
  now: number,
  progress?: StoreCallProgress,
): Promise<WindowedOutcome> {
  const { index, end } = windowAt(spec.window, now);
  const label = windowLabel(spec.window);
  const windowKey = `${label}:${index}`;
  const item: ItemKey = { PK: { S: spec.key }, SK: { S: windowKey + table.regionSuffix } };
  const ttlSeconds = Math.ceil(end / 1000) + table.ttlGraceSeconds;
  // A read (cost 0: a peek) is a consistent GetItem, which makes no item and costs no write.
  const increment =
    spec.cost === 0
      ? readItem(table.client, table.name, item, progress).then((found) => ({ Attributes: found }))
      : table.client.call<{ Attributes?: Attributes }>(
          "UpdateItem",
          {
            TableName: table.name,
            Key: item,
            UpdateExpression: "ADD #count :cost SET #ttl = if_not_exists(#ttl, :ttl)",
            ExpressionAttributeNames: { "#count": "count", "#ttl": "ttl" },
            ExpressionAttributeValues: {
              ":cost": { N: String(spec.cost) },
              ":ttl": { N: String(ttlSeconds + windowSeconds(spec.window, now)) },
            },
            ReturnValues: "UPDATED_NEW",
          },
          { progress },
        );
  const previous = table.sums.closedWindow(spec.key, `${label}:${index - 1}`, now, progress);
  const remote = table.sums.remote(spec.key, windowKey, now, progress);
  const [answer, previousCount, remoteSums] = await Promise.all([increment, previous, remote]);
  const own = numberOf(answer.Attributes?.count);
  const remoteCount = remoteSums?.get("count") ?? 0;
  const before: WindowedState = {
    index,
    count: own - spec.cost + remoteCount,
    previous: previousCount,
    span: windowSpanOf(spec.window),
  };
  const after: WindowedState = { ...before, count: own + remoteCount };
  const allowed = ALGORITHMS[spec.algorithm].allows(before, now, spec);
  return { kind: "windowed", before, after, allowed, item, attribute: "count" };
}
