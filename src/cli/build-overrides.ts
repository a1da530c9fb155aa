import { EdgelimitError } from "../core/errors.js";
import type { ResolvedPolicy } from "../policy/types.js";
import type { DynamoDbStoreOptions } from "../stores/dynamodb.js";

/** `buildLambdaEdge`'s `overrides` option: on or off, or on with these timings. */
export type BuildOverridesOption =
  | boolean
  | { readonly refreshMs?: number; readonly firstWaitMs?: number };

/**
 * What the bundle passes `edgeOverrides` besides the policy, or undefined when it reads no
 * overrides: on by default for a policy with an `overrides:` section (one that bounds them
 * expects them), since each instance's reads cost DynamoDB requests and a cold start's first
 * requests wait for the first.
 */
export function overridesSettings(
  options: {
    readonly overrides?: BuildOverridesOption | undefined;
    readonly store: DynamoDbStoreOptions;
  },
  policy: ResolvedPolicy,
): { globalTables: boolean; refreshMs?: number; firstWaitMs?: number } | undefined {
  const asked = options.overrides ?? policy.overrides !== undefined;
  if (asked === false) return undefined;
  const settings = asked === true ? {} : asked;
  for (const [name, value, least] of [
    ["refreshMs", settings.refreshMs, 10],
    ["firstWaitMs", settings.firstWaitMs, 0],
  ] as const) {
    if (value !== undefined && (!Number.isSafeInteger(value) || value < least)) {
      throw new EdgelimitError(
        "EL_BAD_OPTION",
        `buildLambdaEdge: overrides.${name} ${value} is not a whole number of milliseconds of ${least} or more`,
      );
    }
  }
  return { globalTables: (options.store.globalRegions ?? []).length > 0, ...settings };
}
