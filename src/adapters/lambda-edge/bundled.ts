import { EdgelimitError } from "../../core/errors.js";
import type { ResolvedPolicy } from "../../core/model.js";
import { checkArgument, checkOptions, POLICY } from "../../core/options.js";
import { readHeader } from "../../core/request-headers.js";
import type { ChallengeHandler } from "../../core/types.js";
import { dynamodbStoreShape } from "../../stores/dynamodb/store.js";
import type { DynamoDbStoreOptions } from "../../stores/dynamodb.js";
import { nearestReplica, roundTripMs } from "./regions.js";

/**
 * The store settings a bundled function runs with. Lambda@Edge runs in the region of the
 * regional edge cache nearest the viewer and says which in `AWS_REGION`: the function writes to
 * the replica nearest that region (its own when there is one, by the approximate round trips in
 * `regions.ts`) and tells the store that round trip (`expectedRoundTripMs`), so that a distant
 * replica's latency is not taken for a failing store. Hybrid counting reserves in one region
 * (`leaseRegion`, by default the table's first): its round trip from here is told the same way.
 * Outside Lambda, or in a region the table does not know, the configured region is kept.
 */
export function bundledStoreOptions(
  settings: DynamoDbStoreOptions,
  runningIn: string | undefined,
): DynamoDbStoreOptions {
  if (typeof EDGELIMIT_BUNDLE === "undefined") {
    checkOptions("bundledStoreOptions", settings, dynamodbStoreShape(), {
      code: "EL_STORE_OPTION",
    });
    checkArgument("bundledStoreOptions", "the region it runs in", runningIn, [
      "string",
      {
        describe: "undefined (outside Lambda)",
        test: (value) => value === undefined,
      },
    ]);
  }
  if (runningIn === undefined) return settings;
  const nearest = nearestReplica(runningIn, settings.globalRegions ?? [settings.region]);
  if (nearest === undefined) return settings;
  const leaseRegion = settings.leaseRegion ?? settings.globalRegions?.[0] ?? settings.region;
  const leaseRoundTripMs =
    leaseRegion === nearest.region ? nearest.roundTripMs : roundTripMs(runningIn, leaseRegion);
  return {
    ...settings,
    region: nearest.region,
    expectedRoundTripMs: nearest.roundTripMs,
    leaseRegion,
    ...(leaseRoundTripMs === undefined ? {} : { leaseRoundTripMs }),
  };
}

/**
 * Defers building the challenge (its keys, the policy hash, and in a bundle its code: the page
 * and its verification sit in a chunk loaded by `import()`) until a request needs it: one that
 * carries the pass cookie or asks for the challenge page. Most requests carry neither, so the
 * cold start pays for none of it.
 */
export function lazyChallenge(
  policy: ResolvedPolicy,
  create: () => ChallengeHandler | undefined | Promise<ChallengeHandler | undefined>,
): ChallengeHandler | undefined {
  if (typeof EDGELIMIT_BUNDLE === "undefined") {
    checkArgument("lazyChallenge", "the policy (first argument)", policy, POLICY);
    checkArgument("lazyChallenge", "create (second argument)", create, "function");
  }
  if (!policy.rules.some((rule) => rule.action === "challenge" && !rule.shadow)) return undefined;
  let built: ChallengeHandler | undefined;
  let pending: Promise<ChallengeHandler> | undefined;
  const get = (): Promise<ChallengeHandler> => {
    pending ??= (async () => {
      const handler = await create();
      if (handler === undefined)
        throw new EdgelimitError("EL_BAD_OPTION", "the policy's challenge could not be built");
      built = handler;
      return handler;
    })().catch((error: unknown) => {
      // A failed load (a chunk that could not be read) is retried by the next request.
      pending = undefined;
      throw error;
    });
    return pending;
  };
  const cookiePrefix = `${policy.challenge.cookie.name}=`;
  return {
    path: policy.challenge.path,
    passes: {
      verify(request, subject, now) {
        if (built !== undefined) return built.passes.verify(request, subject, now);
        if (!(readHeader(request.headers, "cookie") ?? "").includes(cookiePrefix)) return false;
        return get().then((handler) => handler.passes.verify(request, subject, now));
      },
    },
    handle: async (request, client) => (await get()).handle(request, client),
  };
}
