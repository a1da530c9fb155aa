/**
 * The published surface: each entry point of package.json `exports` and a few of the names the
 * docs promise it carries (all values, so both `Object.keys` and a type-checked import see them).
 */
export const ENTRY_POINTS: Record<string, string[]> = {
  edgelimit: [
    "createLimiter",
    "definePolicy",
    "loadPolicy",
    "memoryStore",
    "createRateLimit",
    "EdgelimitError",
  ],
  "edgelimit/redis": ["redisStore", "redisStoreFromUrl", "RedisStore"],
  "edgelimit/redis-rest": ["redisRestStore", "redisRestStoreFromUrl", "RedisRestStore"],
  "edgelimit/dynamodb": ["dynamodbStore", "dynamodbStoreFromUrl", "DynamoDbStore"],
  "edgelimit/dynamodb-fetch": ["dynamodbFetchStore", "DynamoDbFetchStore", "DynamoDbFetchClient"],
  "edgelimit/lambda-edge": ["createViewerRequestHandler", "createViewerResponseHandler"],
  "edgelimit/cloudflare": ["createCloudflareHandler", "EdgelimitCounter", "checkCloudflarePolicy"],
  "edgelimit/fetch": ["withRateLimit", "honoRateLimit", "refusalResponse"],
  "edgelimit/node": [
    "nodeRateLimit",
    "guardNodeRequest",
    "fastifyRateLimit",
    "prometheusMetrics",
    "NodeMetrics",
  ],
};
