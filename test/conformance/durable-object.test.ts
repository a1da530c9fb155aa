import { describe } from "vitest";
import { describeConformance } from "../support/conformance/index.js";
import { durableObjectTarget } from "../support/conformance/targets.js";

describe("the Durable Object in workerd", () => {
  describeConformance(durableObjectTarget, { runs: 20, maxSteps: 60 });
});
