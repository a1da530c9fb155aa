import { describe } from "vitest";
import { describeConformance } from "../support/conformance/index.js";
import { dynamodbAllowanceTarget } from "../support/conformance/targets.js";

// The regions count their exact rules in items of their own (globalRegions), per region by
// design: the hybrid histories are the ones that must hold across them.
describe("DynamoDB (dynalite), processes in three regions with region holders and allowances", () => {
  describeConformance(dynamodbAllowanceTarget, { runs: 20, maxSteps: 60, hybridOnly: true });
});
