import { describe } from "vitest";
import { describeConformance } from "../support/conformance/index.js";
import { dynamodbFetchTarget } from "../support/conformance/targets.js";

describe("DynamoDB over fetch (edgelimit/dynamodb-fetch, dynalite)", () => {
  describeConformance(dynamodbFetchTarget, { runs: 20, maxSteps: 60 });
});
