import { describe } from "vitest";
import { describeConformance } from "../support/conformance/index.js";
import { dynamodbTarget } from "../support/conformance/targets.js";

describe("DynamoDB (dynalite)", () => {
  describeConformance(dynamodbTarget, { runs: 20, maxSteps: 60 });
});
