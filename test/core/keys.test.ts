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

  it("keeps braces out of keys so Redis Cluster hash tags stay intact", () => {
    expect(escapeKeyPart("{user}")).toBe("%7Buser%7D");
    expect(subjectKey("user", "a|b:c")).toBe("user:a%7Cb%3Ac");
  });
});
