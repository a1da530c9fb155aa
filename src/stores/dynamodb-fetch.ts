/**
 * `edgelimit/dynamodb-fetch`: counters in DynamoDB (and Global Tables) over `fetch`, signed
 * with WebCrypto, for runtimes that have Web APIs and no Node built-ins: Next.js middleware,
 * Vercel Edge, Deno Deploy, workerd, anything bundled for the browser platform. It counts the
 * same items as `edgelimit/dynamodb`, so the two share one table. The implementation is in
 * `dynamodb/` (`fetch-store.ts`, `fetch-client.ts`, and what both stores share).
 */
export type { AwsCredentials } from "../aws/sigv4-request.js";
export {
  type AwsCredentialsProvider,
  DynamoDbFetchClient,
  type DynamoDbFetchClientOptions,
} from "./dynamodb/fetch-client.js";
export {
  DynamoDbFetchStore,
  type DynamoDbFetchStoreOptions,
  dynamodbFetchStore,
} from "./dynamodb/fetch-store.js";
export { DynamoDbError } from "./dynamodb/protocol.js";
export type { CircuitBreakerOptions } from "./remote/breaker.js";
