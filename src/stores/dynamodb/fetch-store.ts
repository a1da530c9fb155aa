import type { AwsCredentials } from "../../aws/sigv4-request.js";
import { checkOptions, type OptionsShape } from "../../core/options.js";
import { isWorkerd } from "../remote/runtime.js";
import { type AwsCredentialsProvider, DynamoDbFetchClient } from "./fetch-client.js";
import { credentials, tableShape } from "./options.js";
import type { DynamoDbTableOptions } from "./table-options.js";
import { DynamoDbTableStore } from "./table-store.js";

export interface DynamoDbFetchStoreOptions extends DynamoDbTableOptions {
  /**
   * Static credentials or a provider of temporary ones. Default: `AWS_ACCESS_KEY_ID`,
   * `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN` from `process.env` where the runtime has
   * one; on workerd pass them (from the Worker's secrets).
   */
  readonly credentials?: AwsCredentials | AwsCredentialsProvider;
  /**
   * How long a fresh instance's calls count as connection setup, from its first call (default
   * 1000 ms): `fetch` cannot say when its connection is up (see `DynamoDbFetchClient`).
   */
  readonly connectTimeoutMs?: number;
}

export function dynamodbFetchStoreShape() {
  return {
    ...tableShape(),
    credentials: [credentials(), "function"],
    connectTimeoutMs: "number",
  } satisfies OptionsShape<DynamoDbFetchStoreOptions>;
}

/**
 * Counters in DynamoDB over `fetch` (`fetch-client.ts`), for runtimes with Web APIs only:
 * Next.js middleware, Vercel Edge, Deno Deploy, workerd, any bundle for the browser platform.
 * The same items, expressions, block cache, fail modes and budget as `DynamoDbStore`
 * (`DynamoDbTableStore` is both), so the two can count in one table.
 */
export class DynamoDbFetchStore extends DynamoDbTableStore<DynamoDbFetchClient> {
  override readonly name = "dynamodb-fetch";

  constructor(options: DynamoDbFetchStoreOptions) {
    if (typeof EDGELIMIT_BUNDLE === "undefined")
      checkOptions("dynamodbFetchStore", options, dynamodbFetchStoreShape(), {
        code: "EL_STORE_OPTION",
      });
    super(
      options,
      (region, endpoint) =>
        new DynamoDbFetchClient({
          region,
          endpoint,
          credentials: options.credentials,
          requestTimeoutMs: options.requestTimeoutMs,
          connectTimeoutMs: options.connectTimeoutMs,
          breaker: options.breaker,
        }),
      "dynamodbFetchStore",
      // On Workers a call one request started is never shared with another.
      isWorkerd(),
    );
  }
}

export function dynamodbFetchStore(options: DynamoDbFetchStoreOptions): DynamoDbFetchStore {
  return new DynamoDbFetchStore(options);
}
