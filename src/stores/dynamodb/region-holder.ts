/**
 * Hybrid counting's region holder on DynamoDB (`RegionHolder` in core/types.ts): one item per
 * hybrid counter, rule, window and region in the region's own replica of the table, written only
 * by that region's processes, so Global Tables' last-writer-wins never drops one of its writes.
 *
 * `granted` is what the region reserved in the lease item and added here; `left` is what no
 * process has taken yet. A take is `ADD left -n` on the condition `left >= n`: DynamoDB's
 * condition expressions compare, they do not add, so the holder keeps `left` rather than a
 * count of what was taken. A take that finds less than it asked for takes what is left (a second
 * conditional write, with the amount the failed one returned), as long as that covers the
 * request. No unit is ever taken twice, and the item's window is in its key: a unit is only
 * ever spent in the window its lease item counted it in. A take in the last part of a window
 * may also add 1 to `ahead`: the take that makes it 1 reserves the next window for the region.
 */
import type {
  CounterSpec,
  HolderState,
  RegionHolder,
  StoreCallProgress,
} from "../../core/types.js";
import { windowAt } from "../../core/windows.js";
import { type Attributes, type ItemKey, numberOf, windowKeyAt } from "./items.js";
import { type DynamoDbClient, DynamoDbError } from "./protocol.js";

/** Writes a take makes at most: its ask, then what is left (twice, if another took it first). */
const TAKE_ATTEMPTS = 3;

const TAKE_NAMES = { "#l": "left", "#t": "ttl" };
const CLAIM_NAMES = { ...TAKE_NAMES, "#a": "ahead" };
const FILL_NAMES = { "#g": "granted", "#l": "left", "#s": "store", "#t": "ttl" };
const FULL_NAMES = { "#f": "full", "#t": "ttl" };

export class DynamoDbRegionHolder implements RegionHolder {
  readonly #client: DynamoDbClient;
  readonly #tableName: string;
  readonly #ttlGraceSeconds: number;
  readonly #region: string;
  /** A failed take came back with the holder's item: this server returns it (DynamoDB does). */
  #returnsItems = false;

  /** `client`: the region's nearest replica; `region`: this store's, the holder's owner. */
  constructor(client: DynamoDbClient, tableName: string, ttlGraceSeconds: number, region: string) {
    this.#client = client;
    this.#tableName = tableName;
    this.#ttlGraceSeconds = ttlGraceSeconds;
    this.#region = region;
  }

  async take(
    counter: CounterSpec,
    units: number,
    now: number,
    claimAhead: boolean,
    progress?: StoreCallProgress,
  ): Promise<HolderState> {
    let ask = units;
    let found: Attributes | undefined;
    for (let attempt = 0; attempt < TAKE_ATTEMPTS && ask >= counter.cost; attempt++) {
      try {
        const answer = await this.#update(
          counter,
          now,
          claimAhead
            ? "ADD #l :minus, #a :one SET #t = if_not_exists(#t, :ttl)"
            : "ADD #l :minus SET #t = if_not_exists(#t, :ttl)",
          claimAhead ? CLAIM_NAMES : TAKE_NAMES,
          {
            ":minus": { N: String(-ask) },
            ":n": { N: String(ask) },
            ...(claimAhead ? { ":one": { N: "1" } } : {}),
          },
          "#l >= :n",
          progress,
        );
        return {
          ...stateOf(answer, ask),
          claimedAhead: claimAhead && numberOf(answer?.ahead) === 1,
        };
      } catch (error) {
        if (!(error instanceof DynamoDbError) || error.type !== "ConditionalCheckFailedException") {
          throw error;
        }
        // Less is left than was asked: take what is left, if it covers the request. Without
        // the item (none yet, the region's first request in the window) nothing is read: the
        // request reserves in the lease item, and a read here would only add a round trip to
        // the path that already waits. A server that never returns the item with a failed
        // condition (dynalite) gets one more take, of the request's own cost, instead: until
        // one failure has come back with its item, this server may be such a one.
        found = error.item;
        if (found !== undefined) this.#returnsItems = true;
        ask =
          found === undefined && !this.#returnsItems && ask > counter.cost
            ? counter.cost
            : Math.min(ask, numberOf(found?.left));
      }
    }
    const fullAt = found?.full === undefined ? undefined : numberOf(found.full);
    return fullAt === undefined ? stateOf(found, 0) : { ...stateOf(found, 0), fullAt };
  }

  async markFull(counter: CounterSpec, now: number): Promise<void> {
    await this.#update(
      counter,
      now,
      "SET #f = :at, #t = if_not_exists(#t, :ttl)",
      FULL_NAMES,
      { ":at": { N: String(now) } },
      undefined,
    );
  }

  async fill(
    counter: CounterSpec,
    units: number,
    storeCount: number,
    now: number,
  ): Promise<HolderState> {
    const answer = await this.#update(
      counter,
      now,
      "ADD #g :n, #l :n SET #s = :store, #t = if_not_exists(#t, :ttl)",
      FILL_NAMES,
      { ":n": { N: String(units) }, ":store": { N: String(storeCount) } },
      undefined,
    );
    return stateOf(answer, 0);
  }

  #key(counter: CounterSpec, now: number): ItemKey {
    return holderKey(counter, now, this.#region);
  }

  #ttl(counter: CounterSpec, now: number): { N: string } {
    return holderTtl(counter, now, this.#ttlGraceSeconds);
  }

  async #update(
    counter: CounterSpec,
    now: number,
    expression: string,
    names: Record<string, string>,
    values: Record<string, { N: string }>,
    condition: string | undefined,
    progress?: StoreCallProgress,
  ): Promise<Attributes | undefined> {
    const answer = await this.#client.call<{ Attributes?: Attributes }>(
      "UpdateItem",
      {
        TableName: this.#tableName,
        Key: this.#key(counter, now),
        UpdateExpression: expression,
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: { ...values, ":ttl": this.#ttl(counter, now) },
        ReturnValues: "ALL_NEW",
        ...(condition === undefined
          ? {}
          : { ConditionExpression: condition, ReturnValuesOnConditionCheckFailure: "ALL_OLD" }),
      },
      { progress },
    );
    return answer.Attributes;
  }
}

/** A region's holder item: the counter's key, then the rule, the window and the region. */
export function holderKey(counter: CounterSpec, now: number, region: string): ItemKey {
  const rule = `${counter.limit}:${counter.algorithm}`;
  return {
    PK: { S: counter.key },
    SK: { S: `holder:${rule}:${windowKeyAt(counter.window, now)}#${region}` },
  };
}

/** When a holder item may go: its window's end and the table's grace. */
export function holderTtl(counter: CounterSpec, now: number, graceSeconds: number): { N: string } {
  const end = windowAt(counter.window, now).end;
  return { N: String(Math.ceil(end / 1000) + graceSeconds) };
}

function stateOf(item: Attributes | undefined, taken: number): HolderState {
  return {
    taken,
    granted: numberOf(item?.granted),
    left: numberOf(item?.left),
    storeCount: numberOf(item?.store),
  };
}
