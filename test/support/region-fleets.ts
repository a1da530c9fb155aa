/**
 * The limiters of each region, built through the library as a deployment builds them: each
 * process its own store client and, for hybrid rules, its own `hybridCounting` in front of it.
 *
 * - DynamoDB (`dynamodbFleets`): every region writes its own replica (`region`,
 *   `globalRegions`), and reserves hybrid capacity in the lease region's (`leaseRegion`,
 *   `leaseEndpoint`, `leaseRoundTripMs`), as docs/aws.md describes;
 * - Redis (`redisFleets`): one primary, reached directly from its own region and through the
 *   delay proxy from the other.
 */
import { hybridCounting } from "../../src/core/hybrid-counting.js";
import type { ResolvedPolicy } from "../../src/core/model.js";
import type { Store } from "../../src/core/types.js";
import { createLimiter } from "../../src/limiter.js";
import { DynamoDbStore } from "../../src/stores/dynamodb.js";
import { redisStoreFromUrl } from "../../src/stores/redis/store.js";
import { TEST_CREDENTIALS } from "../dynamodb/harness.js";
import type { RegionFleet } from "./region-traffic.js";
import type { FarRedis, Regions } from "./regions.js";

export interface Fleets {
  readonly fleets: readonly RegionFleet[];
  /** One decision in every limiter, for a subject of its own: connections open, round trips measured. */
  warm(): Promise<void>;
  close(): Promise<void>;
}

function fleetsOf(
  policy: ResolvedPolicy,
  stores: readonly { readonly region: string; readonly store: Store }[],
): Fleets {
  const hybrid = policy.rules.some((rule) => rule.counting === "hybrid");
  const byRegion = new Map<string, RegionFleet["limiters"][number][]>();
  for (const { region, store } of stores) {
    const limiter = createLimiter({
      policy,
      store: hybrid ? hybridCounting(store) : store,
      onStoreError: false,
    });
    byRegion.set(region, [...(byRegion.get(region) ?? []), limiter]);
  }
  return {
    fleets: [...byRegion].map(([region, limiters]) => ({ region, limiters })),
    async warm() {
      const limiters = [...byRegion.values()].flat();
      await Promise.all(limiters.map((limiter) => limiter.check({ ip: "10.250.0.1", path: "/" })));
    },
    async close() {
      await Promise.all(stores.map(({ store }) => store.close?.()));
    },
  };
}

/**
 * `perRegion` processes in each region. Reservations go to the first region (the lease
 * region); `leaseRoundTripMs` is the round trip the far regions are told it takes (default:
 * `2 * delayMs`, the truth).
 */
export function dynamodbFleets(
  regions: Regions,
  options: {
    readonly policy: ResolvedPolicy;
    readonly perRegion: number;
    readonly delayMs: number;
    readonly leaseRoundTripMs?: number;
    /** Region holders and allowances (the store's opt-in `regionHolder`, `regionAllowance`). */
    readonly allowances?: boolean;
  },
): Fleets {
  const names = regions.regions.map(({ name }) => name);
  const lease = names[0] as string;
  const stores = names.flatMap((region) =>
    Array.from({ length: options.perRegion }, () => ({
      region,
      store: new DynamoDbStore({
        table: regions.table,
        region,
        endpoint: regions.endpoint(region, region),
        credentials: TEST_CREDENTIALS,
        globalRegions: names,
        leaseRegion: lease,
        leaseEndpoint: regions.endpoint(region, lease),
        leaseRoundTripMs: region === lease ? 0 : (options.leaseRoundTripMs ?? 2 * options.delayMs),
        ...(options.allowances === true
          ? {
              regionHolder: true,
              regionAllowance: true,
              regionEndpoints: Object.fromEntries(
                names.map((to) => [to, regions.endpoint(region, to)]),
              ),
            }
          : {}),
      }),
    })),
  );
  return fleetsOf(options.policy, stores);
}

/** `perRegion` gateways beside the Redis primary ("near") and as many far from it ("far"). */
export function redisFleets(
  redis: FarRedis,
  options: { readonly policy: ResolvedPolicy; readonly perRegion: number },
): Fleets {
  const stores = (["near", "far"] as const).flatMap((region) =>
    Array.from({ length: options.perRegion }, () => ({
      region,
      store: redisStoreFromUrl(region === "near" ? redis.nearUrl : redis.farUrl),
    })),
  );
  return fleetsOf(options.policy, stores);
}
