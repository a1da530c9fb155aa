import type { AwsCredentials } from "../../aws/sigv4.js";
import { checkOptions, type OptionsShape } from "../../core/options.js";
import { DynamoDbHttpClient } from "./client.js";
import { credentials, tableShape } from "./options.js";
import type { DynamoDbTransport } from "./protocol.js";
import { ALLOWANCE_SUPPORT } from "./region-allowance.js";
import type { DynamoDbTableOptions } from "./table-options.js";
import { DynamoDbTableStore } from "./table-store.js";

export interface DynamoDbStoreOptions extends DynamoDbTableOptions {
  /** Default: the standard environment variables, read on first use (Lambda sets them). */
  readonly credentials?: AwsCredentials;
  /** Sockets kept open per endpoint (default 64). */
  readonly maxSockets?: number;
  /** How long a new socket may take to be ready: DNS, TCP and TLS (default 1000 ms). */
  readonly connectTimeoutMs?: number;
  /** Calls go to this instead of over HTTP (the simulator's table model; see DynamoDbTransport). */
  readonly transport?: DynamoDbTransport;
}

export function dynamodbStoreShape() {
  return {
    ...tableShape(),
    credentials: credentials(),
    maxSockets: "number",
    connectTimeoutMs: "number",
    transport: "object",
  } satisfies OptionsShape<DynamoDbStoreOptions>;
}

/**
 * Counters in DynamoDB through node:https (`client.ts`): for Node, the gateway and Lambda@Edge.
 * What it counts and how is `DynamoDbTableStore`'s; `DynamoDbFetchStore` counts the same items
 * over `fetch`.
 */
export class DynamoDbStore extends DynamoDbTableStore<DynamoDbHttpClient> {
  constructor(options: DynamoDbStoreOptions) {
    if (typeof EDGELIMIT_BUNDLE === "undefined")
      checkOptions("dynamodbStore", options, dynamodbStoreShape(), { code: "EL_STORE_OPTION" });
    super(
      options,
      (region, endpoint) =>
        new DynamoDbHttpClient({
          region,
          endpoint,
          credentials: options.credentials,
          requestTimeoutMs: options.requestTimeoutMs,
          maxSockets: options.maxSockets,
          connectTimeoutMs: options.connectTimeoutMs,
          breaker: options.breaker,
          transport: options.transport,
        }),
      "dynamodbStore",
      false,
      // Region allowances: left out of a Lambda@Edge bundle whose store has none (cli/build.ts).
      typeof EDGELIMIT_REGION_ALLOWANCES === "undefined" ? ALLOWANCE_SUPPORT : undefined,
    );
  }

  /**
   * Opens a connection to the endpoint now, so that the first decision finds the TCP and TLS
   * handshakes done (a Lambda@Edge function calls it while its module initialises).
   */
  preconnect(): void {
    for (const client of this.clients) client.preconnect();
  }
}

export function dynamodbStore(options: DynamoDbStoreOptions): DynamoDbStore {
  return new DynamoDbStore(options);
}
