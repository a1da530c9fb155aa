import { describe } from "vitest";
import { describeConformance } from "../support/conformance/index.js";
import { dynamodbRegionsTarget } from "../support/conformance/targets.js";

describe("DynamoDB (dynalite), processes in two regions with region holders", () => {
  describeConformance(dynamodbRegionsTarget, { runs: 20, maxSteps: 60 });
});
