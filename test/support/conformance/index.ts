/** One store target, started once per test file, through the contract and the histories. */
import { afterAll, beforeAll } from "vitest";
import { describeStoreContract } from "./contract.js";
import { describeHistories } from "./histories.js";
import type { Target } from "./targets.js";

/**
 * `hybridOnly`: a target whose exact counting is not exact by design (regions that each count
 * their own items, as Global Tables do) runs only the hybrid histories, which must be.
 */
export function describeConformance(
  makeTarget: () => Promise<Target>,
  options: { readonly runs: number; readonly maxSteps: number; readonly hybridOnly?: boolean },
): void {
  let target: Target | undefined;
  beforeAll(async () => {
    target = await makeTarget();
  }, 120_000);
  afterAll(async () => {
    await target?.cleanup();
  });
  const current = (): Target => {
    if (target === undefined) throw new Error("the store target did not start");
    return target;
  };
  if (options.hybridOnly === true) {
    describeHistories(current, { ...options, countings: ["hybrid"] });
    return;
  }
  describeStoreContract(current);
  describeHistories(current, options);
}
