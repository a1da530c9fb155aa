import { describe } from "vitest";
import { describeConformance } from "../support/conformance/index.js";
import { redisTarget } from "../support/conformance/targets.js";

describe("redis-server", () => {
  describeConformance(redisTarget, { runs: 20, maxSteps: 60 });
});
