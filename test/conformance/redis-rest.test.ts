import { describe } from "vitest";
import { describeConformance } from "../support/conformance/index.js";
import { redisRestTarget } from "../support/conformance/targets.js";

describe("Redis over HTTP (the Upstash REST protocol, to a real redis-server)", () => {
  describeConformance(redisRestTarget, { runs: 20, maxSteps: 60 });
});
