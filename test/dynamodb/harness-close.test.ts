import { expect, it } from "vitest";
import { createRateLimitTable, startDynalite } from "./harness.js";

// dynalite throws an uncaught exception when an update it had taken reaches its closed database,
// which fails the whole test run, whatever file's cleanup closed it (a conformance target's
// closes its stores with their last writes queued on one item).
it("closes dynalite with updates of one item still queued, and nothing is thrown", async () => {
  for (let round = 0; round < 3; round++) {
    const local = await startDynalite();
    await createRateLimitTable(local.client, "queued");
    const updates = Array.from({ length: 200 }, () =>
      local.client
        .call("UpdateItem", {
          TableName: "queued",
          Key: { PK: { S: "subject" }, SK: { S: "window" } },
          UpdateExpression: "ADD hits :one",
          ExpressionAttributeValues: { ":one": { N: "1" } },
        })
        .then(
          () => "answered",
          () => "cut off",
        ),
    );
    await new Promise((resolve) => setTimeout(resolve, 20));
    await local.close();
    const outcomes = await Promise.all(updates);
    expect(outcomes).toHaveLength(200);
  }
});
