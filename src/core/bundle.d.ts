/**
 * `true` only in the Lambda@Edge bundles `edgelimit build` writes (src/cli/build.ts defines it), whose every
 * option the build wrote itself from a checked policy and checked store settings. There each
 * run-time check of options (core/options.ts) is dead code, which esbuild drops with its shape,
 * so the Lambda@Edge cold start loads none of it. Everywhere else it is not defined at all.
 */
declare const EDGELIMIT_BUNDLE: true | undefined;

/**
 * `false` in the Lambda@Edge bundles whose store settings leave region allowances off (src/cli/build.ts):
 * the DynamoDB store's allowances (stores/dynamodb/region-allowance.ts) are then dead code, left
 * out of the bundle. Everywhere else it is not defined at all.
 */
declare const EDGELIMIT_REGION_ALLOWANCES: false | undefined;
