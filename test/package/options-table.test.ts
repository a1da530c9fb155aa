/**
 * Every public function's options, as plain JavaScript passes them (through `any`, where no
 * type stops a mistake): each export of each entry point of package.json `exports` is either a
 * row here (a misspelt option, a missing required one, one of the wrong kind), a function whose
 * positional arguments are checked, or listed with the reason it takes no options. Each mistake
 * is an `EdgelimitError` with its code and a message that names the function and the option,
 * never a TypeError from deep inside.
 */
import { describe, expect, it } from "vitest";
import { EdgelimitError } from "../../src/core/errors.js";
import { limiter, m, modules, policy, store } from "./options-table/entries.js";
import { ARGUMENTS, NO_OPTIONS } from "./options-table/others.js";
import { ROWS } from "./options-table/rows.js";

/** Runs `call` and returns what it threw, which must be an EdgelimitError. */
function refusal(call: () => unknown): EdgelimitError {
  try {
    call();
  } catch (error) {
    expect(error, String(error)).toBeInstanceOf(EdgelimitError);
    return error as EdgelimitError;
  }
  throw new Error("accepted");
}

describe("every public function's options, as plain JavaScript passes them", () => {
  it("the table covers every export of every entry point", () => {
    expect(Object.keys(modules).sort()).toEqual(
      [
        "edgelimit",
        "edgelimit/cloudflare",
        "edgelimit/dynamodb",
        "edgelimit/dynamodb-fetch",
        "edgelimit/fetch",
        "edgelimit/lambda-edge",
        "edgelimit/node",
        "edgelimit/redis",
        "edgelimit/redis-rest",
      ].sort(),
    );
    for (const [entry, module] of Object.entries(modules)) {
      const covered = new Set([
        ...ROWS.filter((row) => row.entry === entry).flatMap((row) => row.exports),
        ...ARGUMENTS.filter((row) => row.entry === entry).map((row) => row.name),
        ...Object.keys(NO_OPTIONS[entry] ?? {}),
      ]);
      expect(
        Object.keys(module).filter((name) => !covered.has(name)),
        entry,
      ).toEqual([]);
    }
  });

  describe.each(ROWS)("$entry $name", (row) => {
    it(`a misspelt option: unknown, with the one meant (${row.misspelt[1]} for ${row.misspelt[0]})`, () => {
      const [right, wrong] = row.misspelt;
      const { [right]: value, ...rest } = row.valid;
      const error = refusal(() => row.call({ ...rest, [wrong]: value ?? 1 }));
      expect(error.code).toBe(row.code);
      expect(error.message).toMatch(new RegExp(`^${row.name}: `));
      expect(error.message).toContain(`unknown option \`${wrong}\`: did you mean \`${right}\`?`);
      expect(error.issues.map((issue) => issue.path)).toContain(wrong);
    });

    it.skipIf(row.required === undefined)(
      `a missing required option: named (${row.required})`,
      () => {
        const { [row.required as string]: _, ...rest } = row.valid;
        const error = refusal(() => row.call(rest));
        expect(error.code).toBe(row.code);
        expect(error.message).toMatch(
          new RegExp(`^${row.name}: \`${row.required}\` is required: `),
        );
      },
    );

    it(`an option of the wrong kind: named, with what it must be (${row.wrongKind[0]})`, () => {
      const [option, value, mustBe] = row.wrongKind;
      const error = refusal(() => row.call({ ...row.valid, [option]: value }));
      expect(error.code).toBe(row.code);
      expect(error.message).toContain(`${row.name}: \`${option}\` must be ${mustBe}`);
      // A string in the wrong place may be a secret: it is never echoed.
      if (typeof value === "string") {
        expect(error.message).toContain("got a string");
        expect(error.message).not.toContain(value);
      }
    });

    it.skipIf(row.required !== undefined || row.connects === true)(
      "no options at all: accepted",
      () => {
        expect(() => row.call(undefined)).not.toThrow();
      },
    );

    it("options that are not an object: refused, naming what is required", () => {
      const error = refusal(() => row.call("options"));
      expect(error.code).toBe(row.code);
      expect(error.message).toMatch(
        new RegExp(
          `^${row.name}: options must be an object${row.required === undefined ? "" : " with .*"}; got a string$`,
        ),
      );
    });
  });

  it.each(ARGUMENTS)("$entry $name: a positional argument of the wrong kind", (row) => {
    const error = refusal(row.call);
    expect(error.code).toBe(row.code);
    expect(error.message).toContain(row.message);
  });
});

describe("the mistakes a newcomer made (issue 33)", () => {
  it("createLimiter({ polcy }): the option meant, not a TypeError about identity", () => {
    const error = refusal(() => m("edgelimit").createLimiter({ polcy: policy, store }));
    expect(error.message).toBe(
      "createLimiter: 2 problems with its options\n  unknown option `polcy`: did you mean `policy`?\n  `policy` is required: a policy from definePolicy(input), loadPolicy(file) or parsePolicy(text)",
    );
  });

  it("createLimiter({ policy }) without a store: the store is named", () => {
    const error = refusal(() => m("edgelimit").createLimiter({ policy }));
    expect(error.message).toBe(
      "createLimiter: `store` is required: a store (memoryStore(), redisStore({ client }), dynamodbStore({ region }), ...)",
    );
  });

  it("nodeRateLimit({ limitr }) and ({ limiter, skipp }): refused, with the option meant", () => {
    expect(refusal(() => m("edgelimit/node").nodeRateLimit({ limitr: limiter })).message).toBe(
      "nodeRateLimit: 2 problems with its options\n  unknown option `limitr`: did you mean `limiter`?\n  `limiter` is required: a limiter from createLimiter({ policy, store })",
    );
    expect(
      refusal(() => m("edgelimit/node").nodeRateLimit({ limiter, skipp: () => true })).message,
    ).toBe("nodeRateLimit: unknown option `skipp`: did you mean `skip`?");
  });

  it("createRateLimit({ windowMs }): says that ours is window, a duration", () => {
    const error = refusal(() =>
      m("edgelimit").createRateLimit({ store, limit: 10, windowMs: 60_000 }),
    );
    expect(error.code).toBe("EL_BAD_OPTION");
    expect(error.message).toBe(
      'createRateLimit: 2 problems with its options\n  unknown option `windowMs`: express-rate-limit\'s `windowMs` is `window` here, a duration such as "60s" (not milliseconds)\n  `window` is required: a duration such as "60s", "1h" or "1mo"',
    );
  });

  it("nodeRateLimit({ windowMs, max }): the limits are the policy's", () => {
    const error = refusal(() =>
      m("edgelimit/node").nodeRateLimit({ limiter, windowMs: 60_000, max: 100 }),
    );
    expect(error.message).toContain(
      "unknown option `windowMs`: express-rate-limit's `windowMs` is a rule's `window` here",
    );
    expect(error.message).toContain(
      "unknown option `max`: express-rate-limit's `max` is a rule's `limit` here",
    );
  });
});
