import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { EdgelimitError } from "../../src/core/errors.js";

describe("error codes", () => {
  it("each has a section in docs/errors.md, which EdgelimitError.docs names", () => {
    const source = readFileSync("src/core/errors.ts", "utf8");
    const union = source.slice(
      source.indexOf("export type ErrorCode"),
      source.indexOf(";", source.indexOf("export type ErrorCode")),
    );
    const codes = [...union.matchAll(/"(EL_[A-Z_]+)"/g)].map((match) => match[1] as string);
    expect(codes.length).toBeGreaterThan(20);
    const docs = readFileSync("docs/errors.md", "utf8");
    const headings = new Set([...docs.matchAll(/^### (EL_[A-Z_]+)$/gm)].map((match) => match[1]));
    expect(codes.filter((code) => !headings.has(code))).toEqual([]);
    const error = new EdgelimitError("EL_STORE_URL", "x");
    expect(error.docs).toBe("docs/errors.md#el_store_url");
  });
});
