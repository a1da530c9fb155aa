import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { textOfBytes } from "../../src/rls/bytes-text.js";

/** The bytes a text stands for: UTF-8, with each lone surrogate U+DC80..U+DCFF as its byte. */
function bytesOfText(text: string): number[] {
  const bytes: number[] = [];
  for (const char of text) {
    const code = char.codePointAt(0) as number;
    if (code >= 0xdc80 && code <= 0xdcff) bytes.push(code - 0xdc00);
    else bytes.push(...Buffer.from(char, "utf8"));
  }
  return bytes;
}

describe("text of a descriptor's bytes", () => {
  it("is the UTF-8 text where the bytes are UTF-8", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary" }), (text) => {
        const wellFormed = Buffer.from(text, "utf8");
        expect(textOfBytes(wellFormed)).toBe(wellFormed.toString("utf8"));
      }),
      { numRuns: 2_000 },
    );
  });

  it("keeps every byte sequence apart: the bytes come back from the text", () => {
    const nearUtf8 = fc.array(
      fc.oneof(
        fc.integer({ min: 0, max: 255 }),
        fc.constantFrom(0x80, 0xbf, 0xc0, 0xc2, 0xe0, 0xed, 0xef, 0xf0, 0xf4, 0xf5, 0xff),
      ),
      { maxLength: 24 },
    );
    fc.assert(
      fc.property(nearUtf8, (bytes) => {
        expect(bytesOfText(textOfBytes(Uint8Array.from(bytes)))).toEqual(bytes);
      }),
      { numRuns: 20_000 },
    );
    expect(textOfBytes(Uint8Array.from([0xef, 0xbb, 0xbf, 0x61]))).toBe("\ufeffa"); // a BOM stays
    expect(textOfBytes(Uint8Array.from([0xff]))).toBe("\udcff");
    expect(textOfBytes(Uint8Array.from([0xfe]))).toBe("\udcfe");
    // An overlong "/" and an encoded surrogate are not UTF-8: each byte stands for itself.
    expect(textOfBytes(Uint8Array.from([0xc0, 0xaf]))).toBe("\udcc0\udcaf");
    expect(textOfBytes(Uint8Array.from([0x61, 0xed, 0xa0, 0x80, 0x62]))).toBe(
      "a\udced\udca0\udc80b",
    );
  });
});
