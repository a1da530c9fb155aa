/**
 * Where Lambda@Edge runs, and how far each of those regions is from the others.
 *
 * CloudFront runs a Lambda@Edge function in the AWS Region of the regional edge cache that
 * serves the viewer, and says which in `AWS_REGION`. These are the 13 regions with a regional
 * edge cache.
 */
export const LAMBDA_EDGE_REGIONS = [
  "us-east-1",
  "us-east-2",
  "us-west-1",
  "us-west-2",
  "sa-east-1",
  "eu-west-1",
  "eu-west-2",
  "eu-central-1",
  "ap-south-1",
  "ap-southeast-1",
  "ap-southeast-2",
  "ap-northeast-1",
  "ap-northeast-2",
] as const;

/**
 * Approximate round trips in milliseconds between the regions above, rounded to 5 ms: median
 * inter-region ping times as published by public measurements of AWS's network (such as
 * cloudping.co's inter-region matrix), not measured by edgelimit. They move by a few ms from
 * day to day; they are good enough to rank replicas and to compare with a 50 ms budget, not
 * to promise a latency. Row `i` holds the round trips from region `i` to every region after it
 * (the table is symmetric), so the bundle carries 78 numbers instead of 169.
 */
const ROUND_TRIPS_MS: readonly (readonly number[])[] = [
  // us-east-1 to us-east-2, us-west-1, us-west-2, sa-east-1, eu-west-1, eu-west-2,
  // eu-central-1, ap-south-1, ap-southeast-1, ap-southeast-2, ap-northeast-1, ap-northeast-2
  [10, 60, 65, 115, 70, 75, 90, 185, 215, 195, 145, 175],
  // us-east-2 to us-west-1 ... ap-northeast-2
  [50, 50, 125, 80, 85, 100, 195, 205, 190, 135, 165],
  // us-west-1 to us-west-2 ... ap-northeast-2
  [20, 175, 130, 140, 150, 230, 170, 140, 110, 135],
  // us-west-2 to sa-east-1 ... ap-northeast-2
  [175, 120, 130, 140, 220, 165, 140, 100, 125],
  // sa-east-1 to eu-west-1 ... ap-northeast-2
  [180, 185, 200, 300, 325, 310, 255, 285],
  // eu-west-1 to eu-west-2 ... ap-northeast-2
  [10, 25, 120, 175, 255, 200, 230],
  // eu-west-2 to eu-central-1 ... ap-northeast-2
  [15, 110, 170, 265, 210, 240],
  // eu-central-1 to ap-south-1 ... ap-northeast-2
  [120, 160, 250, 225, 230],
  // ap-south-1 to ap-southeast-1, ap-southeast-2, ap-northeast-1, ap-northeast-2
  [60, 150, 125, 130],
  // ap-southeast-1 to ap-southeast-2, ap-northeast-1, ap-northeast-2
  [95, 70, 75],
  // ap-southeast-2 to ap-northeast-1, ap-northeast-2
  [105, 145],
  // ap-northeast-1 to ap-northeast-2
  [35],
];

/**
 * The approximate round trip between two regions in ms (0 within a region), or undefined when
 * either is not in the table.
 */
export function roundTripMs(from: string, to: string): number | undefined {
  if (from === to) return 0;
  const regions: readonly string[] = LAMBDA_EDGE_REGIONS;
  const a = regions.indexOf(from);
  const b = regions.indexOf(to);
  if (a < 0 || b < 0) return undefined;
  const [low, high] = a < b ? [a, b] : [b, a];
  return ROUND_TRIPS_MS[low]?.[high - low - 1];
}

export interface NearestReplica {
  readonly region: string;
  /** 0 when the function runs in the replica's own region. */
  readonly roundTripMs: number;
}

/**
 * The replica with the shortest round trip from `runningIn` by the table above: its own region
 * when it holds a replica, else the nearest known one (the first listed on a tie); undefined
 * when no replica's distance is known.
 */
export function nearestReplica(
  runningIn: string,
  replicas: readonly string[],
): NearestReplica | undefined {
  let nearest: NearestReplica | undefined;
  for (const region of replicas) {
    const distance = roundTripMs(runningIn, region);
    if (distance !== undefined && (nearest === undefined || distance < nearest.roundTripMs))
      nearest = { region, roundTripMs: distance };
  }
  return nearest;
}

/**
 * One line per Lambda@Edge region whose nearest replica is farther than `budgetMs`, naming the
 * region, the replica and the round trip: every decision made there waits that long for the
 * store. Used by `edgelimit build lambda-edge` and by the CDK stack, at build time only.
 */
export function distantReplicaWarnings(replicas: readonly string[], budgetMs: number): string[] {
  const warnings: string[] = [];
  for (const region of LAMBDA_EDGE_REGIONS) {
    const nearest = nearestReplica(region, replicas);
    if (nearest === undefined) {
      warnings.push(
        `Lambda@Edge in ${region}: no round-trip figure for any replica (${replicas.join(", ")}), so its distance cannot be checked against the ${budgetMs} ms budget`,
      );
    } else if (nearest.roundTripMs > budgetMs) {
      warnings.push(
        `Lambda@Edge in ${region} writes to the replica in ${nearest.region}, about ${nearest.roundTripMs} ms away: more than the policy's ${budgetMs} ms budget, so every decision there waits that long for the store; add a replica in ${region} (or one within ${budgetMs} ms of it)`,
      );
    }
  }
  return warnings;
}
