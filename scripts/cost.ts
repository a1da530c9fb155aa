/**
 * DynamoDB cost of rate limiting at the edge: seed 000's design against edgelimit's, for the
 * seed's 50M requests a month in 4 regions. Run: npx tsx scripts/cost.ts [--requests 50e6]
 * [--path-share 0.3] [--blocked-share 0.2] [--cache-hit 0.9] [--regions 4] [--shared-window 1]
 * [--writes-per-item 5]
 */
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: {
    requests: { type: "string", default: "50e6" },
    regions: { type: "string", default: "4" },
    "path-share": { type: "string", default: "0.3" },
    "blocked-share": { type: "string", default: "0.2" },
    "cache-hit": { type: "string", default: "0.9" },
    "remote-read-share": { type: "string", default: "0.25" },
    "shared-window": { type: "string", default: "1" },
    "writes-per-item": { type: "string", default: "5" },
  },
});

const requests = Number(values.requests);
const regions = Number(values.regions);
/** Requests that also match a per-path rule (two counters instead of one). */
const pathShare = Number(values["path-share"]);
/** Requests refused because their client is over a limit (the seed's scraper). */
const blockedShare = Number(values["blocked-share"]);
/** Of those, the share the local block cache answers without touching DynamoDB. */
const cacheHit = Number(values["cache-hit"]);
/** Counters whose other-region sum is not in the 1 s cache and must be read (Query). */
const remoteReadShare = Number(values["remote-read-share"]);
/**
 * Of the per-path requests, the share whose path rule has the global rule's window (the seed's
 * policy: every rule is per 60 s): edgelimit counts both in one item, with one write.
 */
const sharedWindow = Number(values["shared-window"]);
/**
 * Writes an item takes before its window ends (a client's counted requests per window). Every
 * item is deleted once by TTL: free in the region that deletes it, but on a global table the
 * delete reaches every other replica as a replicated write.
 */
const writesPerItem = Number(values["writes-per-item"]);

// On-demand prices, us-east-1, after AWS's November 2024 reduction (USD per million units).
const PRICE = {
  writeUnit: 0.625,
  replicatedWriteUnit: 0.625,
  readUnit: 0.125,
};

const countersPerRequest = 1 + pathShare;
/** edgelimit writes one item per subject and window, whatever the number of counters in it. */
const itemsPerRequest = 1 + pathShare * (1 - sharedWindow);
const reachesDynamoDb = 1 - blockedShare * cacheHit;

interface Design {
  readonly name: string;
  readonly writesPerRequest: number;
  /** Read request units per request (eventually consistent Query of < 4 KB = 0.5 RRU). */
  readonly readUnitsPerRequest: number;
  readonly replicatedTo: number;
  readonly note: string;
}

const designs: Design[] = [
  {
    name: "seed as costed (1 write/request)",
    writesPerRequest: 1,
    readUnitsPerRequest: 0,
    replicatedTo: regions - 1,
    note: "the seed's own table; loses increments across regions",
  },
  {
    name: "seed as coded (path + global)",
    writesPerRequest: countersPerRequest,
    readUnitsPerRequest: 0,
    replicatedTo: regions - 1,
    note: "two sequential UpdateItems on path requests; keeps writing for blocked clients",
  },
  {
    name: "edgelimit, per-region items",
    writesPerRequest: itemsPerRequest * reachesDynamoDb,
    readUnitsPerRequest: itemsPerRequest * reachesDynamoDb * remoteReadShare * 0.5,
    replicatedTo: regions - 1,
    note: "no lost increments; blocked clients answered from the block cache",
  },
  {
    name: "edgelimit on an MRSC table (3 regions)",
    writesPerRequest: itemsPerRequest * reachesDynamoDb,
    readUnitsPerRequest: 0,
    replicatedTo: 2,
    note: "shared items, exact everywhere; MRSC needs exactly 3 regions and writes wait for a second region",
  },
  {
    name: "edgelimit, single region",
    writesPerRequest: itemsPerRequest * reachesDynamoDb,
    readUnitsPerRequest: 0,
    replicatedTo: 0,
    note: "exact; remote edges pay a cross-region round trip",
  },
];

function monthly(design: Design): { writes: number; cost: number; perMillion: number } {
  const writes = requests * design.writesPerRequest;
  const ttlDeletesReplicated = (writes / writesPerItem) * design.replicatedTo;
  const replicated = writes * design.replicatedTo + ttlDeletesReplicated;
  const reads = requests * design.readUnitsPerRequest;
  const cost =
    (writes * PRICE.writeUnit + replicated * PRICE.replicatedWriteUnit + reads * PRICE.readUnit) /
    1e6;
  return {
    writes: writes + replicated,
    cost,
    perMillion: ((writes + replicated) / requests) * 1e6,
  };
}

const lines = [
  `Assumptions: ${requests / 1e6}M requests/month, ${regions} regions, ${pathShare * 100}% of requests on a per-path rule, ${blockedShare * 100}% blocked, ${cacheHit * 100}% of blocked answered by the block cache, ${sharedWindow * 100}% of path rules share the global rule's window (one item, one write for both), ${remoteReadShare * 100}% of items re-read other regions (1 s cache), ${writesPerItem} writes per item before TTL deletes it (each TTL delete is a replicated write in every other region).`,
  `Prices (on-demand, us-east-1): $${PRICE.writeUnit}/M write units, $${PRICE.replicatedWriteUnit}/M replicated write units, $${PRICE.readUnit}/M read units; items < 1 KB (1 WRU per write).`,
  "",
  "| design | write units per 1M requests (all regions) | write units / month | DynamoDB $/month | note |",
  "|---|---:|---:|---:|---|",
];
for (const design of designs) {
  const { writes, cost, perMillion } = monthly(design);
  lines.push(
    `| ${design.name} | ${(perMillion / 1e6).toFixed(2)}M | ${(writes / 1e6).toFixed(0)}M | $${cost.toFixed(2)} | ${design.note} |`,
  );
}
process.stdout.write(`${lines.join("\n")}\n`);
