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
 * Counters in DynamoDB, one item per counter and window: `PK` is the counter key (subject,
 * namespace and scope), `SK` the window (`60000ms:29512345`), `count` a number incremented with
 * `ADD`, `ttl` set once with `if_not_exists`.
 *
 * One request is one round of parallel calls (its counters live in different items, which
 * DynamoDB cannot update together without a transaction at twice the price). Admission is
 * optimistic: every counter is incremented, each increment returns a count no other request
 * saw, so a single counter never admits more than its limit under any concurrency. When one
 * counter refuses, the increments on the counters that would have admitted are given back in
 * the background, so quotas the request never used are not spent; until that refund lands a
 * concurrent request may be refused by a count that is briefly one too high (never admitted by
 * one too low). See docs/aws.md for the full trade-off.
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
    this.#tatHints = new GenerationalCache(perGeneration);
  }

  async apply(counters: readonly CounterSpec[], now: number): Promise<CounterState[]> {
    const outcomes = await Promise.all(
      counters.map((spec) =>
        spec.algorithm === "token-bucket"
          ? this.#takeTokens(spec, now)
          : this.#countWindow(spec, now),
      ),
    );
    let admitted = true;
    for (let i = 0; i < counters.length; i++) {
      if ((counters[i] as CounterSpec).mode === "enforce" && !(outcomes[i] as Outcome).allowed) {
        admitted = false;
      }
    }
    const states: CounterState[] = [];
    for (let i = 0; i < counters.length; i++) {
      const spec = counters[i] as CounterSpec;
      const outcome = outcomes[i] as Outcome;
      const refund = !admitted && spec.mode === "enforce" && outcome.allowed;
      if (refund) this.#refund(spec, outcome);
      const algorithm = ALGORITHMS[spec.algorithm];
      states.push(
        algorithm.describe(refund ? outcome.before : outcome.after, now, spec, outcome.allowed),
      );
    }
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

  async #countWindow(spec: CounterSpec, now: number): Promise<WindowedOutcome> {
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
          ":ttl": {
            N: String(
              spec.algorithm === "sliding-window"
                ? ttlSeconds + windowSeconds(spec.window, now)
                : ttlSeconds,
            ),
          },
        },
        ReturnValues: "UPDATED_NEW",
      },
    );
    const previous =
      spec.algorithm === "sliding-window"
        ? this.#closedWindowSum(spec.key, `${label}:${index - 1}`, now)
        : Promise.resolve(0);
    const remote = this.#global ? this.#remoteSum(spec.key, windowKey, now) : Promise.resolve(0);
    const [answer, previousCount, remoteCount] = await Promise.all([increment, previous, remote]);
    const own = numberOf(answer.Attributes?.count);
    const before: WindowedState = {
      index,
      count: own - spec.cost + remoteCount,
      previous: previousCount,
    };
    const after: WindowedState = { index, count: own + remoteCount, previous: previousCount };
    const allowed = ALGORITHMS[spec.algorithm].allows(before, now, spec);
    return { kind: "windowed", before, after, allowed, item };
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

  #refund(spec: CounterSpec, outcome: Outcome): void {
    const amount = outcome.kind === "windowed" ? spec.cost : outcome.taken;
    if (amount === 0) return;
    const attribute = outcome.kind === "windowed" ? "count" : "tat";
    const refund = this.client
      .call("UpdateItem", {
        TableName: this.table,
        Key: outcome.item,
        UpdateExpression: "ADD #value :amount",
        ExpressionAttributeNames: { "#value": attribute },
        ExpressionAttributeValues: { ":amount": { N: String(-amount) } },
      })
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
      sum = await this.#querySum(key, windowKey, undefined);
    } else {
      const found = await this.#readItem({ PK: { S: key }, SK: { S: windowKey } });
      sum = numberOf(found?.count);
    }
    this.#sums.set(cacheKey, { sum, until: now + this.#remoteCacheMs });
    return sum;
  }

  /** Other regions' counts for this window, reused for `remoteCacheMs`. */
  async #remoteSum(key: string, windowKey: string, now: number): Promise<number> {
    const cacheKey = `${key}\u0000${windowKey}`;
    const cached = this.#sums.get(cacheKey);
    if (cached !== undefined && cached.until > now) return cached.sum;
    const sum = await this.#querySum(key, windowKey, windowKey + this.#regionSuffix);
    this.#sums.set(cacheKey, { sum, until: now + this.#remoteCacheMs });
    return sum;
  }

  async #querySum(key: string, windowKey: string, skip: string | undefined): Promise<number> {
    const answer = await this.client.call<{ Items?: Record<string, AttributeValue>[] }>("Query", {
      TableName: this.table,
      KeyConditionExpression: "PK = :pk AND begins_with(SK, :window)",
      ProjectionExpression: "SK, #count",
      ExpressionAttributeNames: { "#count": "count" },
      ExpressionAttributeValues: { ":pk": { S: key }, ":window": { S: `${windowKey}#` } },
    });
    let sum = 0;
    for (const found of answer.Items ?? []) {
      if (skip !== undefined && (found.SK as { S: string } | undefined)?.S === skip) continue;
      sum += numberOf(found.count);
    }
    return sum;
  }
}

function numberOf(value: AttributeValue | undefined): number {
  if (value === undefined || !("N" in value)) return 0;
  return Number(value.N);
}

function windowLabel(window: WindowSpec): string {
  return "ms" in window ? `${window.ms}ms` : `${window.months}mo`;
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
