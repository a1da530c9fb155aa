import { EdgelimitError } from "../../core/errors.js";
import { readHeader } from "../../core/identity.js";
import type { ChallengeHandler } from "../../core/types.js";
import type { ResolvedPolicy } from "../../policy/types.js";
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

/**
 * Defers building the challenge (its keys, the policy hash) until a request needs it: one that
 * carries the pass cookie or asks for the challenge page. Most requests carry neither, so the
 * cold start does not pay for it.
 */
export function lazyChallenge(
  policy: ResolvedPolicy,
  create: () => ChallengeHandler | undefined,
): ChallengeHandler | undefined {
  if (!policy.rules.some((rule) => rule.action === "challenge" && !rule.shadow)) return undefined;
  let built: ChallengeHandler | undefined;
  const get = (): ChallengeHandler => {
    built ??= create();
    if (built === undefined)
      throw new EdgelimitError("EL_BAD_ARGUMENT", "the policy's challenge could not be built");
    return built;
  };
  const cookiePrefix = `${policy.challenge.cookie.name}=`;
  return {
    path: policy.challenge.path,
    passes: {
      verify(request, subject, now) {
        if (
          built === undefined &&
          !(readHeader(request.headers, "cookie") ?? "").includes(cookiePrefix)
        ) {
          return false;
        }
        return get().passes.verify(request, subject, now);
      },
    },
    handle: (request, client) => get().handle(request, client),
  };
}
