/**
 * `edgelimit/dynamodb`: counters in DynamoDB (and Global Tables), through a small SigV4 client
 * of our own. The implementation is in `dynamodb/`; this file is the package entry point.
 */
export {
  type AwsCredentials,
  type DynamoDbClientOptions,
  DynamoDbError,
  DynamoDbHttpClient,
  type DynamoDbTransport,
} from "./dynamodb/client.js";
export { DynamoDbStore, type DynamoDbStoreOptions, dynamodbStore } from "./dynamodb/store.js";
export { dynamodbStoreFromUrl, parseDynamodbUrl } from "./dynamodb/url.js";
