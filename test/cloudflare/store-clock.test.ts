/**
 * The Durable Object counts on the later of its own clock and its caller's, and says which time
 * it counted at (`storeNow`): hybrid counting's reservations end with the object's window, not
 * with the isolate's idea of it.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Store } from "../../src/core/types.js";
import { spec, virtualStart } from "../support/conformance/contract.js";
import { durableObjectTarget, type Target } from "../support/conformance/targets.js";

let target: Target;
let store: Store;

beforeAll(async () => {
  target = await durableObjectTarget();
  [store] = (await target.stores(1)) as [Store];
}, 120_000);

afterAll(async () => {
  await target?.cleanup();
});

describe("the Durable Object's clock", () => {
  it("answers with its own time when the caller's clock is behind", async () => {
    const before = Date.now();
    const [state] = await store.apply([spec("ip:behind|t|global", 5)], before - 60_000);
    expect(state?.storeNow).toBeGreaterThanOrEqual(before);
    expect(state?.storeNow).toBeLessThanOrEqual(Date.now());
  });

  it("answers with the caller's time when the caller's clock is ahead", async () => {
    const ahead = virtualStart();
    const [state] = await store.apply([spec("ip:ahead|t|global", 5)], ahead);
    expect(state?.storeNow).toBe(ahead);
  });
});
