import type { TokenBucketState, WindowedState } from "../core/algorithms/index.js";
import { ALGORITHMS } from "../core/algorithms/index.js";
import { EdgelimitError } from "../core/errors.js";
import { GenerationalCache } from "../core/generational-cache.js";
import type { CounterSpec, CounterState, Store, WindowSpec } from "../core/types.js";
import { windowAt, windowLengthMs } from "../core/windows.js";
import {
  type AttributeValue,
  type AwsCredentials,
  DynamoDbError,
  DynamoDbHttpClient,
} from "./dynamodb-client.js";

export { type AwsCredentials, DynamoDbError, DynamoDbHttpClient } from "./dynamodb-client.js";

export interface DynamoDbStoreOptions {
  /** Table name (default `rate-limits`): partition key `PK`, sort key `SK`, TTL attribute `ttl`. */
  readonly table?: string;
  /** The region this process writes to (with Global Tables: its nearest replica). */
  readonly region: string;
  /** A DynamoDB-protocol endpoint (`http://127.0.0.1:4567` for dynalite); default AWS's. */
  readonly endpoint?: string;
  readonly credentials?: AwsCredentials;
  /**
   * Global Tables: the replica regions. Each region then writes only its own item per counter
   * and window (`SK` suffixed `#<region>`) and reads the sum over regions, so replication
   * (last writer wins per item) never overwrites another region's increments.
   */
  readonly globalRegions?: readonly string[];
  /** How long other regions' counts (and closed previous windows) are reused (default 1000 ms). */
  readonly remoteCacheMs?: number;
  /** Seconds an item outlives its window before TTL may delete it (default 300, as the seed). */
  readonly ttlGraceSeconds?: number;
  readonly requestTimeoutMs?: number;
  readonly maxSockets?: number;
  /** Bound of the per-instance caches (remote sums, token-bucket hints); default 10,000 keys. */
  readonly maxCachedKeys?: number;
  /**
   * The known round trip to `region` in ms (0 when in-region), added to the decision budget so
   * that a distant replica's latency is not taken for a failing store.
   */
  readonly expectedRoundTripMs?: number;
}

const DEFAULT_TABLE = "rate-limits";
const TOKEN_BUCKET_ATTEMPTS = 4;
const EPSILON = 1e-6;

interface WindowedOutcome {
  readonly kind: "windowed";
  readonly before: WindowedState;
  readonly after: WindowedState;
  readonly allowed: boolean;
  readonly item: ItemKey;
  /** The numeric attribute holding this counter in `item`. */
  readonly attribute: string;
}

interface TokenOutcome {
  readonly kind: "token";
  readonly before: TokenBucketState | undefined;
  readonly after: TokenBucketState | undefined;
  readonly allowed: boolean;
  /** Tokens taken, to give back when another counter refuses (0 when nothing was written). */
  readonly taken: number;
  readonly item: ItemKey;
}

type Outcome = WindowedOutcome | TokenOutcome;

interface ItemKey {
  readonly PK: { S: string };
  readonly SK: { S: string };
}

/**
 * Counters in DynamoDB. The fixed-window counters of one subject and one window share an item:
 * `PK` the subject (`ip:203.0.113.7`), `SK` the window (`60000ms:29512345`), one number per
 * counter named by its namespace and scope (`default|global`), incremented with `ADD`, and
 * `ttl` set once with `if_not_exists`. A request's path rule and global rule are then one
 * `UpdateItem`, one write unit. Sliding windows keep one item per counter and window (`PK` the
 * counter key, attribute `count`) so that the previous window reads alone; token buckets one
 * item per counter (`SK` `tb`).
 *
 * One request is one round of parallel calls, one per item (items cannot be updated together
 * without a transaction at twice the price). Admission is optimistic: every counter is
 * incremented, each increment returns a count no other request saw, so a single counter never
 * admits more than its limit under any concurrency. When one counter refuses, the increments on
 * the counters that would have admitted are given back in the background (one call per item),
 * so quotas the request never used are not spent; until that refund lands a concurrent request
 * may be refused by a count that is briefly one too high (never admitted by one too low). See
 * docs/aws.md for the full trade-off.
 *
 * Token buckets use a conditional `SET tat = tat + :step` (or `:fresh` on an idle key), one
 * call in the common case; a refused request writes nothing. Items are never trusted for being
 * there: an item's window is in its key, and a token bucket's `tat` in the past means idle, so
 * an expired item that TTL has not deleted yet reads as what it is.
 */
export class DynamoDbStore implements Store {
  readonly name = "dynamodb";
  readonly local = false;
  readonly table: string;
  readonly region: string;
  readonly client: DynamoDbHttpClient;
  readonly #global: boolean;
  readonly #regionSuffix: string;
  readonly #remoteCacheMs: number;
  readonly #ttlGraceSeconds: number;
  readonly #sums: GenerationalCache<{ sum: number; until: number }>;
  readonly #remoteCounts: GenerationalCache<{ sums: Map<string, number>; until: number }>;
  readonly #tatHints: GenerationalCache<number>;
  readonly #refunds = new Set<Promise<void>>();
  /** Refunds that failed: counts left one too high until their window ends (safe direction). */
  refundFailures = 0;

  constructor(options: DynamoDbStoreOptions) {
    if (typeof options.region !== "string" || options.region === "") {
      throw new EdgelimitError(
        "EL_BAD_ARGUMENT",
        "dynamodbStore: region is required (for example eu-west-1)",
      );
    }
    this.table = options.table ?? DEFAULT_TABLE;
    this.region = options.region;
    this.client = new DynamoDbHttpClient({
      region: options.region,
      endpoint: options.endpoint,
      credentials: options.credentials,
      requestTimeoutMs: options.requestTimeoutMs,
      maxSockets: options.maxSockets,
    });
    const regions = options.globalRegions ?? [];
    this.#global = regions.length > 0;
    if (this.#global && !regions.includes(options.region)) {
      throw new EdgelimitError(
        "EL_BAD_ARGUMENT",
        `dynamodbStore: region ${options.region} is not one of globalRegions (${regions.join(", ")})`,
      );
    }
    this.#regionSuffix = this.#global ? `#${options.region}` : "";
    this.#remoteCacheMs = options.remoteCacheMs ?? 1000;
    this.#ttlGraceSeconds = options.ttlGraceSeconds ?? 300;
    // Bounded caches (at most maxCachedKeys each); see GenerationalCache for why not FIFO.
    const perGeneration = Math.max(1, Math.floor((options.maxCachedKeys ?? 10_000) / 2));
    this.#sums = new GenerationalCache(perGeneration);
    this.#remoteCounts = new GenerationalCache(perGeneration);
    this.#tatHints = new GenerationalCache(perGeneration);
  }

  async apply(counters: readonly CounterSpec[], now: number): Promise<CounterState[]> {
    const outcomes: Outcome[] = new Array(counters.length);
    const calls: Promise<void>[] = [];
    // Fixed windows of one subject and one window share an item: one UpdateItem for them all.
    const shared = new Map<string, number[]>();
    counters.forEach((spec, i) => {
      if (spec.algorithm === "fixed-window") {
        const group = `${spec.subject}\u0000${windowKeyAt(spec.window, now)}`;
        const members = shared.get(group);
        if (members === undefined) shared.set(group, [i]);
        else members.push(i);
        return;
      }
      const pending =
        spec.algorithm === "token-bucket"
          ? this.#takeTokens(spec, now)
          : this.#countSlidingWindow(spec, now);
      calls.push(
        pending.then((outcome) => {
          outcomes[i] = outcome;
        }),
      );
    });
    for (const members of shared.values()) {
      const specs = members.map((i) => counters[i] as CounterSpec);
      calls.push(
        this.#countFixedWindows(specs, now).then((found) => {
          members.forEach((i, j) => {
            outcomes[i] = found[j] as WindowedOutcome;
          });
        }),
      );
    }
    await Promise.all(calls);
    let admitted = true;
    for (let i = 0; i < counters.length; i++) {
      if ((counters[i] as CounterSpec).mode === "enforce" && !(outcomes[i] as Outcome).allowed) {
        admitted = false;
      }
    }
    const states: CounterState[] = [];
    const refunds = new Map<string, { item: ItemKey; amounts: Map<string, number> }>();
    for (let i = 0; i < counters.length; i++) {
      const spec = counters[i] as CounterSpec;
      const outcome = outcomes[i] as Outcome;
      const refund = !admitted && spec.mode === "enforce" && outcome.allowed;
      if (refund) {
        const amount = outcome.kind === "windowed" ? spec.cost : outcome.taken;
        const attribute = outcome.kind === "windowed" ? outcome.attribute : "tat";
        if (amount !== 0) {
          const itemId = `${outcome.item.PK.S}\u0000${outcome.item.SK.S}`;
          let pending = refunds.get(itemId);
          if (pending === undefined) {
            pending = { item: outcome.item, amounts: new Map() };
            refunds.set(itemId, pending);
          }
          pending.amounts.set(attribute, (pending.amounts.get(attribute) ?? 0) + amount);
        }
      }
      const algorithm = ALGORITHMS[spec.algorithm];
      states.push(
        algorithm.describe(refund ? outcome.before : outcome.after, now, spec, outcome.allowed),
      );
    }
    for (const { item, amounts } of refunds.values()) this.#refund(item, amounts);
    return states;
  }

  /** Resolves when every background refund has landed (tests, and before a process exits). */
  async settled(): Promise<void> {
    while (this.#refunds.size > 0) await Promise.all(this.#refunds);
  }

  async close(): Promise<void> {
    await this.settled();
    this.client.close();
  }

  /**
   * Every fixed-window counter of one subject and one window, in one item (`PK` the subject,
   * `SK` the window, one numeric attribute per counter) and one `UpdateItem`: `ADD` returns each
   * counter's new count, which no other request saw, so each stays exact under any concurrency.
   */
  async #countFixedWindows(specs: readonly CounterSpec[], now: number): Promise<WindowedOutcome[]> {
    const first = specs[0] as CounterSpec;
    const { index, end } = windowAt(first.window, now);
    const windowKey = windowKeyAt(first.window, now);
    const item: ItemKey = {
      PK: { S: first.subject },
      SK: { S: windowKey + this.#regionSuffix },
    };
    const names: Record<string, string> = { "#ttl": "ttl" };
    const values: Record<string, AttributeValue> = {
      ":ttl": { N: String(Math.ceil(end / 1000) + this.#ttlGraceSeconds) },
    };
    const additions: string[] = [];
    const attributes = specs.map((spec, i) => {
      const attribute = counterAttribute(spec);
      names[`#c${i}`] = attribute;
      values[`:c${i}`] = { N: String(spec.cost) };
      additions.push(`#c${i} :c${i}`);
      return attribute;
    });
    const increment = this.client.call<{ Attributes?: Record<string, AttributeValue> }>(
      "UpdateItem",
      {
        TableName: this.table,
        Key: item,
        UpdateExpression: `ADD ${additions.join(", ")} SET #ttl = if_not_exists(#ttl, :ttl)`,
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: values,
        ReturnValues: "UPDATED_NEW",
      },
    );
    const remote = this.#global
      ? this.#remoteSums(first.subject, windowKey, now)
      : Promise.resolve(undefined);
    const [answer, remoteSums] = await Promise.all([increment, remote]);
    return specs.map((spec, i) => {
      const attribute = attributes[i] as string;
      const own = numberOf(answer.Attributes?.[attribute]);
      const remoteCount = remoteSums?.get(attribute) ?? 0;
      const before: WindowedState = { index, count: own - spec.cost + remoteCount, previous: 0 };
      const after: WindowedState = { index, count: own + remoteCount, previous: 0 };
      const allowed = ALGORITHMS[spec.algorithm].allows(before, now, spec);
      return { kind: "windowed", before, after, allowed, item, attribute };
    });
  }

  /** A sliding window keeps one item per counter and window, so the previous one reads alone. */
  async #countSlidingWindow(spec: CounterSpec, now: number): Promise<WindowedOutcome> {
    const { index } = windowAt(spec.window, now);
    const label = windowLabel(spec.window);
    const windowKey = `${label}:${index}`;
    const item: ItemKey = { PK: { S: spec.key }, SK: { S: windowKey + this.#regionSuffix } };
    const ttlSeconds = Math.ceil(windowAt(spec.window, now).end / 1000) + this.#ttlGraceSeconds;
    const increment = this.client.call<{ Attributes?: Record<string, AttributeValue> }>(
      "UpdateItem",
      {
        TableName: this.table,
        Key: item,
        UpdateExpression: "ADD #count :cost SET #ttl = if_not_exists(#ttl, :ttl)",
        ExpressionAttributeNames: { "#count": "count", "#ttl": "ttl" },
        ExpressionAttributeValues: {
          ":cost": { N: String(spec.cost) },
          ":ttl": { N: String(ttlSeconds + windowSeconds(spec.window, now)) },
        },
        ReturnValues: "UPDATED_NEW",
      },
    );
    const previous = this.#closedWindowSum(spec.key, `${label}:${index - 1}`, now);
    const remote = this.#global
      ? this.#remoteSums(spec.key, windowKey, now)
      : Promise.resolve(undefined);
    const [answer, previousCount, remoteSums] = await Promise.all([increment, previous, remote]);
    const own = numberOf(answer.Attributes?.count);
    const remoteCount = remoteSums?.get("count") ?? 0;
    const before: WindowedState = {
      index,
      count: own - spec.cost + remoteCount,
      previous: previousCount,
    };
    const after: WindowedState = { index, count: own + remoteCount, previous: previousCount };
    const allowed = ALGORITHMS[spec.algorithm].allows(before, now, spec);
    return { kind: "windowed", before, after, allowed, item, attribute: "count" };
  }

  async #takeTokens(spec: CounterSpec, now: number): Promise<TokenOutcome> {
    const length = windowLengthMs(spec.window, now);
    const step = (spec.cost * length) / spec.limit;
    const item: ItemKey = { PK: { S: spec.key }, SK: { S: `tb${this.#regionSuffix}` } };
    // Admitted while max(tat, now) + step - now <= length, the core GCRA's test.
    const latestTat = now + length - step + EPSILON;
    const ttl = Math.ceil((now + length) / 1000) + this.#ttlGraceSeconds;
    let hint = this.#tatHints.get(spec.key);
    for (let attempt = 0; attempt < TOKEN_BUCKET_ATTEMPTS; attempt++) {
      if (step > length + EPSILON) break;
      const busy = hint !== undefined && hint >= now;
      try {
        const answer = await this.client.call<{ Attributes?: Record<string, AttributeValue> }>(
          "UpdateItem",
          {
            TableName: this.table,
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
        );
        const tat = numberOf(answer.Attributes?.tat);
        this.#tatHints.set(spec.key, tat);
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
        const current = error.item ?? (await this.#readItem(item));
        const tat = current?.tat === undefined ? undefined : numberOf(current.tat);
        if (tat !== undefined && tat > latestTat) {
          this.#tatHints.set(spec.key, tat);
          return { kind: "token", before: { tat }, after: { tat }, allowed: false, taken: 0, item };
        }
        hint = tat;
      }
    }
    if (step > length + EPSILON) {
      const current = await this.#readItem(item);
      const state = current?.tat === undefined ? undefined : { tat: numberOf(current.tat) };
      return { kind: "token", before: state, after: state, allowed: false, taken: 0, item };
    }
    throw new EdgelimitError(
      "EL_STORE_FAILED",
      `dynamodb: token bucket ${spec.key} kept changing under ${TOKEN_BUCKET_ATTEMPTS} attempts`,
    );
  }

  /** Gives back, in one call per item, what a refused request took on counters that admitted it. */
  #refund(item: ItemKey, amounts: ReadonlyMap<string, number>): void {
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
    // Never sent twice: a refund applied twice would count too few (see Http1Pool).
    const refund = this.client
      .call(
        "UpdateItem",
        {
          TableName: this.table,
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
          this.refundFailures++;
        },
      )
      .finally(() => this.#refunds.delete(refund));
    this.#refunds.add(refund);
  }

  async #readItem(item: ItemKey): Promise<Record<string, AttributeValue> | undefined> {
    const answer = await this.client.call<{ Item?: Record<string, AttributeValue> }>("GetItem", {
      TableName: this.table,
      Key: item,
      ConsistentRead: true,
    });
    return answer.Item;
  }

  /** The count of a window that has ended, over every region; stragglers are negligible. */
  async #closedWindowSum(key: string, windowKey: string, now: number): Promise<number> {
    const cacheKey = `${key}\u0000${windowKey}\u0000closed`;
    const cached = this.#sums.get(cacheKey);
    if (cached !== undefined && cached.until > now) return cached.sum;
    let sum: number;
    if (this.#global) {
      sum = (await this.#querySums(key, windowKey, undefined)).get("count") ?? 0;
    } else {
      const found = await this.#readItem({ PK: { S: key }, SK: { S: windowKey } });
      sum = numberOf(found?.count);
    }
    this.#sums.set(cacheKey, { sum, until: now + this.#remoteCacheMs });
    return sum;
  }

  /** Other regions' counts for this window, per attribute, reused for `remoteCacheMs`. */
  async #remoteSums(pk: string, windowKey: string, now: number): Promise<Map<string, number>> {
    const cacheKey = `${pk}\u0000${windowKey}`;
    const cached = this.#remoteCounts.get(cacheKey);
    if (cached !== undefined && cached.until > now) return cached.sums;
    const sums = await this.#querySums(pk, windowKey, windowKey + this.#regionSuffix);
    this.#remoteCounts.set(cacheKey, { sums, until: now + this.#remoteCacheMs });
    return sums;
  }

  /** Sums every counter attribute over the regional items of one window (except `skip`). */
  async #querySums(
    pk: string,
    windowKey: string,
    skip: string | undefined,
  ): Promise<Map<string, number>> {
    const answer = await this.client.call<{ Items?: Record<string, AttributeValue>[] }>("Query", {
      TableName: this.table,
      KeyConditionExpression: "PK = :pk AND begins_with(SK, :window)",
      ExpressionAttributeValues: { ":pk": { S: pk }, ":window": { S: `${windowKey}#` } },
    });
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

function numberOf(value: AttributeValue | undefined): number {
  if (value === undefined || !("N" in value)) return 0;
  return Number(value.N);
}

function windowLabel(window: WindowSpec): string {
  return "ms" in window ? `${window.ms}ms` : `${window.months}mo`;
}

function windowKeyAt(window: WindowSpec, now: number): string {
  return `${windowLabel(window)}:${windowAt(window, now).index}`;
}

/**
 * A counter's attribute in its subject's shared item: the key without the subject (namespace
 * and scope), which always holds a `|`, so it never meets `PK`, `SK` or `ttl`.
 */
function counterAttribute(spec: CounterSpec): string {
  const prefix = `${spec.subject}|`;
  return spec.key.startsWith(prefix) ? spec.key.slice(prefix.length) : spec.key;
}

function windowSeconds(window: WindowSpec, now: number): number {
  return Math.ceil(windowLengthMs(window, now) / 1000);
}

export function dynamodbStore(options: DynamoDbStoreOptions): DynamoDbStore {
  return new DynamoDbStore(options);
}

/**
 * `dynamodb://TABLE?region=R[&endpoint=URL][&regions=R1,R2][&remoteCacheMs=N]`, as
 * `edgelimit serve --store` and `edgelimit build lambda-edge --store` take it.
 */
export function parseDynamodbUrl(url: string): DynamoDbStoreOptions {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new EdgelimitError(
      "EL_BAD_ARGUMENT",
      `not a URL: ${url}; expected dynamodb://TABLE?region=R`,
    );
  }
  if (parsed.protocol !== "dynamodb:") {
    throw new EdgelimitError("EL_BAD_ARGUMENT", `expected dynamodb://TABLE?region=R; got ${url}`);
  }
  const table = decodeURIComponent(parsed.hostname || parsed.pathname.replace(/^\/+/, ""));
  const region = parsed.searchParams.get("region") ?? "";
  if (region === "") {
    throw new EdgelimitError(
      "EL_BAD_ARGUMENT",
      `${url}: add ?region=REGION (for example ?region=us-east-1)`,
    );
  }
  const regions = parsed.searchParams.get("regions");
  const remoteCacheMs = parsed.searchParams.get("remoteCacheMs");
  return {
    table: table === "" ? DEFAULT_TABLE : table,
    region,
    ...(parsed.searchParams.get("endpoint")
      ? { endpoint: parsed.searchParams.get("endpoint") as string }
      : {}),
    ...(regions
      ? {
          globalRegions: regions
            .split(",")
            .map((entry) => entry.trim())
            .filter(Boolean),
        }
      : {}),
    ...(remoteCacheMs ? { remoteCacheMs: Number(remoteCacheMs) } : {}),
  };
}

export function dynamodbStoreFromUrl(url: string): DynamoDbStore {
  return new DynamoDbStore(parseDynamodbUrl(url));
}
