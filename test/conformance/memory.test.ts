import { describe } from "vitest";
import { describeConformance } from "../support/conformance/index.js";
import { memoryTarget } from "../support/conformance/targets.js";

describe("memory store", () => {
  describeConformance(memoryTarget, { runs: 20, maxSteps: 60 });
});
