import { describe } from "vitest";
import { describeConformance } from "../support/conformance/index.js";
import { clusterTarget } from "../support/conformance/targets.js";

describe("a 3-master Redis Cluster", () => {
  describeConformance(clusterTarget, { runs: 20, maxSteps: 60 });
});
