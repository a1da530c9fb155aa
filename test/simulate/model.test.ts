import { describe, expect, it } from "vitest";
import { parseCondition, parseUpdate } from "../../src/simulate/dynamodb-model/expressions.js";
import { TableModel } from "../../src/simulate/dynamodb-model/model.js";
import { EventLoop } from "../../src/simulate/event-loop.js";
import { Random } from "../../src/simulate/random.js";
import { DynamoDbError } from "../../src/stores/dynamodb/client.js";

describe("the event loop", () => {
  it("runs events in (time, sequence) order, skips cancelled ones, and runs continuations at their event's time", async () => {
    const loop = new EventLoop();
    const seen: string[] = [];
    loop.at(20, () => seen.push(`b@${loop.now}`));
    loop.at(10, () => {
      seen.push(`a@${loop.now}`);
      Promise.resolve()
        .then(() => Promise.resolve())
        .then(() => seen.push(`a-continued@${loop.now}`));
    });
    const cancelled = loop.at(15, () => seen.push("never"));
    loop.at(20, () => seen.push(`c@${loop.now}`));
    loop.cancel(cancelled);
    await loop.run(100);
    expect(seen).toEqual(["a@10", "a-continued@10", "b@20", "c@20"]);
    expect(loop.now).toBe(100);
  });

  it("gives the decision budget virtual timers: afterPendingIo runs after the events already due", async () => {
    const loop = new EventLoop();
    const seen: string[] = [];
    loop.at(5, () => {
      loop.scheduler.afterPendingIo(() => seen.push("after-io"));
      seen.push("first");
    });
    loop.at(5, () => seen.push("second"));
    const handle = loop.scheduler.setTimeout(() => seen.push("timer"), 7);
    loop.scheduler.setTimeout(() => seen.push("kept"), 8);
    loop.scheduler.clearTimeout(handle);
    await loop.run(10);
    expect(seen).toEqual(["first", "second", "after-io", "kept"]);
  });
});

describe("the seeded generator", () => {
  it("repeats itself for a seed and differs between seeds and forks", () => {
    const draw = (random: Random) => Array.from({ length: 5 }, () => random.next());
    expect(draw(new Random(1))).toEqual(draw(new Random(1)));
    expect(draw(new Random(1))).not.toEqual(draw(new Random(2)));
    expect(draw(new Random(1).fork("a"))).not.toEqual(draw(new Random(1).fork("b")));
  });
});

describe("the expressions", () => {
  it("parses what the stores write", () => {
    expect(
      parseUpdate("ADD #c0 :c0, #c1 :c1 SET #ttl = if_not_exists(#ttl, :ttl)").map((a) => a.kind),
    ).toEqual(["ADD", "ADD", "SET"]);
    expect(parseUpdate("SET #tat = #tat + :step, #ttl = :ttl")[0]).toMatchObject({
      kind: "SET",
      value: { kind: "arith", op: "+" },
    });
    expect(parseCondition("attribute_not_exists(#tat) OR #tat < :now").kind).toBe("or");
    expect(parseCondition("PK = :pk AND begins_with(SK, :window)").kind).toBe("and");
    expect(() => parseUpdate("SET a")).toThrow(/expected =/);
  });
});

const add = (pk: string) => ({
  TableName: "t",
  Key: { PK: { S: pk }, SK: { S: "w" } },
  UpdateExpression: "ADD #c :one",
  ExpressionAttributeNames: { "#c": "count" },
  ExpressionAttributeValues: { ":one": { N: "1" } },
  ReturnValues: "UPDATED_NEW",
});

describe("the table model", () => {
  const model = () =>
    new TableModel({ tables: [{ name: "t", replicas: ["a", "b"] }], lagMs: () => 1000 });

  it("loses increments to last-writer-wins when two replicas ADD to one item within the lag", () => {
    const table = model();
    for (let i = 0; i < 10; i++) {
      table.execute("a", "UpdateItem", add("shared"), i * 10);
      table.execute("b", "UpdateItem", add("shared"), i * 10 + 5);
    }
    expect(table.incrementTotals()).toEqual({ counted: 20, stored: 10, lost: 10 });
  });

  it("loses none when each replica writes its own item", () => {
    const table = model();
    for (let i = 0; i < 10; i++) {
      table.execute("a", "UpdateItem", add("shared#a"), i * 10);
      table.execute("b", "UpdateItem", add("shared#b"), i * 10 + 5);
    }
    expect(table.incrementTotals()).toEqual({ counted: 20, stored: 20, lost: 0 });
  });

  it("shows a replica another's write only after the lag, and the newer version wins", () => {
    const table = model();
    table.execute("a", "UpdateItem", add("k"), 0);
    const get = { TableName: "t", Key: { PK: { S: "k" }, SK: { S: "w" } }, ConsistentRead: true };
    expect(table.execute("b", "GetItem", get, 999)).toEqual({});
    expect(table.execute("b", "GetItem", get, 1000)).toMatchObject({ Item: { count: { N: "1" } } });
  });

  it("drops items some time after their TTL and keeps their figures", () => {
    const table = new TableModel({
      tables: [{ name: "t", replicas: ["a"] }],
      lagMs: () => 0,
      retainAfterTtlMs: 1000,
    });
    const withTtl = { ...add("k"), UpdateExpression: "ADD #c :one SET #t = :ttl" };
    const input = {
      ...withTtl,
      ExpressionAttributeNames: { "#c": "count", "#t": "ttl" },
      ExpressionAttributeValues: { ":one": { N: "1" }, ":ttl": { N: "100" } },
    };
    table.execute("a", "UpdateItem", input, 0);
    table.sweep(100_999, 1);
    expect(table.itemCounts()).toEqual([{ table: "t", items: 1, replicas: 1 }]);
    table.sweep(101_000, 2);
    expect(table.itemCounts()).toEqual([{ table: "t", items: 1, replicas: 1 }]);
    expect(table.incrementTotals()).toEqual({ counted: 1, stored: 1, lost: 0 });
    const get = { TableName: "t", Key: { PK: { S: "k" }, SK: { S: "w" } } };
    expect(table.execute("a", "GetItem", get, 3)).toEqual({});
  });

  it("answers a failed condition as DynamoDB does, with the old item when asked", () => {
    const table = model();
    table.execute("a", "UpdateItem", add("k"), 0);
    const conditional = {
      ...add("k"),
      ConditionExpression: "attribute_not_exists(#c)",
      ReturnValuesOnConditionCheckFailure: "ALL_OLD",
    };
    let thrown: unknown;
    try {
      table.execute("a", "UpdateItem", conditional, 1);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(DynamoDbError);
    expect(thrown).toMatchObject({
      type: "ConditionalCheckFailedException",
      item: { count: { N: "1" } },
    });
  });
});
