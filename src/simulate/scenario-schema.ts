/**
 * The scenario file's schema (zod) and the `Scenario` it parses to; scenario.ts reads and checks
 * a file against it.
 */
import { z } from "zod";
import { durationProblem, parseDurationMs } from "../core/duration.js";

/** A duration as policies spell it ("90s", "10m", "1h"), or 0. */
const duration = z
  .union([z.string(), z.number()])
  .superRefine((value, context) => {
    if (isZero(value)) return;
    const problem = durationProblem(value);
    if (problem !== undefined) context.addIssue({ code: "custom", message: problem });
  })
  .transform((value) => (isZero(value) ? 0 : parseDurationMs(value)));

function isZero(value: string | number): boolean {
  return value === 0 || value === "0" || value === "0s";
}
const positive = z.number().positive();
const share = z.number().min(0).max(1);
const weights = z.record(z.string(), z.number().min(0));
/** A log-normal distribution by its median and the deviation of its log (0: constant). */
const distribution = z.union([
  positive.transform((median) => ({ median, sigma: 0 })),
  z.strictObject({ median: positive, sigma: z.number().min(0).default(0) }),
]);
const arrival = z.enum(["poisson", "fixed"]).default("poisson");

const incident = z.strictObject({
  replica: z.string(),
  from: duration,
  to: duration,
  /** Added to every call's round trip to that replica. */
  extraMs: z.number().min(0).default(0),
  /** Share of calls answered with an error (InternalServerError) instead. */
  errorRate: share.default(0),
});

const store = z.discriminatedUnion("kind", [
  z.strictObject({
    kind: z.literal("dynamodb"),
    table: z.string().default("rate-limits"),
    /** One region: a single-region table; more: Global Tables replicas. */
    replicas: z.array(z.string()).min(1),
    /** Round trip from each region (outer key) to each replica (inner key), ms. */
    rttMs: z.record(z.string(), z.record(z.string(), z.number().min(0))),
    jitterMs: z.number().min(0).default(0),
    replicationLagMs: distribution.default({ median: 1000, sigma: 0.3 }),
    incidents: z.array(incident).default([]),
    /**
     * Hybrid counting's reservations in a table of their own in one region (the stack's lease
     * table); default: the table itself, in its first replica (the store's default).
     * `holders`: the region holders' table of mode `hybrid+holder` (the store's opt-in
     * `regionHolder`), one of that name in each replica's region, not replicated (default: the
     * table itself, whose holder items then replicate). Other modes ignore it.
     */
    lease: z
      .strictObject({ table: z.string(), region: z.string(), holders: z.string().optional() })
      .optional(),
  }),
  z.strictObject({
    kind: z.literal("redis"),
    /** Round trip from each region to the primary, ms. */
    rttMs: z.record(z.string(), z.number().min(0)),
    jitterMs: z.number().min(0).default(0),
  }),
  z.strictObject({ kind: z.literal("memory") }),
]);

const deployment = z.discriminatedUnion("kind", [
  z.strictObject({
    kind: z.literal("lambda-edge"),
    coldStartMs: z.number().min(0).default(200),
    idle: duration.default(600_000),
    lifetime: duration.default(7_200_000),
    memoryMb: z.number().positive().default(128),
  }),
  z.strictObject({ kind: z.literal("gateway"), processes: z.number().int().positive().default(2) }),
  z.strictObject({
    kind: z.literal("workers"),
    isolates: z.number().int().positive().default(4),
    coldStartMs: z.number().min(0).default(5),
    lifetime: duration.default(60_000),
  }),
]);

const legitimate = z.strictObject({
  name: z.string().optional(),
  clients: z.number().int().positive(),
  tier: z.enum(["anonymous", "authenticated"]).default("anonymous"),
  plan: z.string().optional(),
  requestsPerMinute: distribution,
  arrival,
  regions: weights.optional(),
  paths: weights.default({ "/": 1 }),
});

const attacker = z.strictObject({
  name: z.string().optional(),
  /**
   * scraper: one address; spread: one address, its rate shared by `regions`; ipv6-rotation: a
   * new address per request inside one /64; botnet: `addresses` addresses sharing the rate.
   */
  kind: z.enum(["scraper", "spread", "ipv6-rotation", "botnet"]),
  requestsPerSecond: positive,
  regions: z.array(z.string()).min(1),
  addresses: z.number().int().positive().default(1),
  path: z.string().default("/api/products"),
  arrival: arrival.default("fixed"),
  from: duration.default(0),
  until: duration.optional(),
});

const pricing = z.strictObject({
  writeUnitPerMillion: z.number().min(0).default(0.625),
  replicatedWriteUnitPerMillion: z.number().min(0).default(0.625),
  readUnitPerMillion: z.number().min(0).default(0.125),
  redisPerMonth: z.number().min(0).default(0),
  lambdaEdgeRequestPerMillion: z.number().min(0).default(0.6),
  lambdaEdgeGbSecond: z.number().min(0).default(0.00005001),
});

export const SCENARIO_SCHEMA = z.strictObject({
  name: z.string().default("scenario"),
  seed: z.number().int().min(0).default(1),
  /** Epoch of the simulated clock's start (ISO 8601). */
  start: z.iso.datetime().default("2026-02-14T14:30:00Z"),
  duration,
  /** A policy file, relative to the scenario. */
  policy: z.string(),
  modes: z
    .array(z.enum(["two-writes", "exact", "hybrid", "hybrid+holder", "hybrid+allowance"]))
    .min(1)
    .default(["exact"]),
  /**
   * Runs each mode once per fail mode listed, with every rule that does not fail closed set to
   * it (`failClosed` paths stay closed): `open` and `local` side by side for a store outage.
   * Default: the policy's own.
   */
  failModes: z
    .array(z.enum(["local", "open"]))
    .min(1)
    .optional(),
  regions: z.record(z.string(), z.strictObject({ weight: z.number().min(0).default(1) })),
  store,
  deployment,
  traffic: z.strictObject({
    legitimate: z.array(legitimate).default([]),
    attackers: z.array(attacker).default([]),
  }),
  /** Subjects with more requests than this in one report window are "busy". */
  busyAbove: z.number().int().min(0).default(100),
  reportWindow: duration.default(60_000),
  pricing: pricing.default(pricing.parse({})),
  /** Requests a month the costs are extrapolated to (seed document 000's: 50 M). */
  monthlyRequests: positive.default(50e6),
});

export type Scenario = z.output<typeof SCENARIO_SCHEMA> & { readonly policyPath: string };
