import { resolve } from "node:path";
import { loadScenario, parseScenario, type Scenario } from "../../src/simulate/scenario.js";

export const FIXTURES = resolve("test/simulate/fixtures");
export const POLICY = resolve("examples/policies/cloudfront.yaml");

export function fixtureScenario(name: string): Scenario {
  return loadScenario(resolve(FIXTURES, name));
}

/** A scenario from an object, its policy seed document 000's (examples/policies/cloudfront.yaml). */
export function scenarioOf(input: Record<string, unknown>): Scenario {
  return parseScenario({ policy: POLICY, ...input }, FIXTURES, "test scenario");
}

/** Two regions, a global table of two replicas, seed document 000's policy, Lambda@Edge. */
export function twoRegions(overrides: Record<string, unknown> = {}): Scenario {
  return scenarioOf({
    name: "two-regions",
    duration: "60s",
    modes: ["two-writes", "exact"],
    regions: { "us-east-1": {}, "eu-west-1": {} },
    store: {
      kind: "dynamodb",
      replicas: ["us-east-1", "eu-west-1"],
      rttMs: {
        "us-east-1": { "us-east-1": 6, "eu-west-1": 75 },
        "eu-west-1": { "us-east-1": 75, "eu-west-1": 6 },
      },
      replicationLagMs: 800,
    },
    deployment: { kind: "lambda-edge" },
    traffic: {
      attackers: [{ kind: "spread", requestsPerSecond: 100, regions: ["us-east-1", "eu-west-1"] }],
    },
    ...overrides,
  });
}
