import { describe } from "vitest";
import { describeConformance } from "../support/conformance/index.js";
import { durableObjectAreasTarget } from "../support/conformance/targets.js";

describe("the Durable Objects with areas in workerd", () => {
  describeConformance(durableObjectAreasTarget, { runs: 20, maxSteps: 60, hybridOnly: true });
});
