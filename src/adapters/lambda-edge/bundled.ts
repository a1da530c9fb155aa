import type { DynamoDbStoreOptions } from "../../stores/dynamodb.js";

/**
 * The store settings a bundled function runs with. Lambda@Edge runs in the region nearest the
 * viewer and says which in `AWS_REGION`: with Global Tables the function writes to that
 * region's replica when there is one, and to the configured region otherwise.
 */
export function bundledStoreOptions(
  settings: DynamoDbStoreOptions,
  runningIn: string | undefined,
): DynamoDbStoreOptions {
  const replicas = settings.globalRegions ?? [];
  if (runningIn !== undefined && replicas.includes(runningIn))
    return { ...settings, region: runningIn };
  return settings;
}
