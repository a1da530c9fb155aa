import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { counterKey, escapeKeyPart, subjectKey } from "../../src/core/keys.js";

describe("counter keys", () => {
  it("never map two different (subject, namespace, scope) triples to one key", () => {
    const part = fc.string({ unit: "grapheme-composite", maxLength: 12 });
    const separators = fc.constantFrom("|", ":", "%", "{", "}", "%7C", "a|b", "");
    const piece = fc.oneof(
      part,
      separators,
      fc.tuple(part, separators, part).map((p) => p.join("")),
    );
    const triple = fc.tuple(fc.constantFrom("ip" as const, "user" as const), piece, piece, piece);
    fc.assert(
      fc.property(triple, triple, (a, b) => {
        fc.pre(JSON.stringify(a) !== JSON.stringify(b));
        const keyA = counterKey(subjectKey(a[0], a[1]), a[2], a[3]);
        const keyB = counterKey(subjectKey(b[0], b[1]), b[2], b[3]);
        expect(keyA).not.toBe(keyB);
      }),
      { numRuns: 20_000 },
    );
  });

  it("never map two different parts to one key as UTF-8, lone surrogates included", () => {
    // Redis and DynamoDB hold keys as UTF-8, where every lone surrogate would be U+FFFD.
    const unit = fc.oneof(
      fc.string({ unit: "binary", minLength: 1, maxLength: 1 }),
      fc.integer({ min: 0xd800, max: 0xdfff }).map((code) => String.fromCharCode(code)),
      fc.constantFrom("\ufffd", "%", "|", "%uDCFF", "u"),
    );
    const part = fc.array(unit, { maxLength: 6 }).map((units) => units.join(""));
    fc.assert(
      fc.property(part, part, part, (a, b, scope) => {
        fc.pre(a !== b);
        const asUtf8 = (value: string) =>
          Buffer.from(counterKey(subjectKey("user", value), "ns", scope)).toString("hex");
        expect(asUtf8(a)).not.toBe(asUtf8(b));
      }),
      { numRuns: 20_000 },
    );
    expect(escapeKeyPart("\udcff|\ud83d\ude00")).toBe("%uDCFF%7C\ud83d\ude00");
  });

  it("keeps braces out of keys so Redis Cluster hash tags stay intact", () => {
    expect(escapeKeyPart("{user}")).toBe("%7Buser%7D");
    expect(subjectKey("user", "a|b:c")).toBe("user:a%7Cb%3Ac");
  });
});
