import { describe, expect, it } from "vitest";
import { safeRedirect } from "../../src/challenge/redirect.js";

describe("safeRedirect", () => {
  it.each([
    ["/", "/"],
    ["/reports", "/reports"],
    ["/api/search?q=a%20b&page=2", "/api/search?q=a%20b&page=2"],
    ["/a/../b", "/b"],
    ["/search?next=https://evil.example", "/search?next=https://evil.example"],
  ])("keeps the same-origin path %s", (input, expected) => {
    expect(safeRedirect(input)).toBe(expected);
  });

  it.each([
    "//evil.example",
    "//evil.example/path",
    "https://evil.example",
    "http:evil.example",
    "javascript:alert(1)",
    "/\\evil.example",
    "\\\\evil.example",
    "/\t/evil.example",
    "/\n/evil.example",
    "/%2Fevil.example",
    "%2F%2Fevil.example",
    "/%2F%2Fevil.example",
    "%252F%252Fevil.example",
    "/%5Cevil.example",
    "/%255Cevil.example",
    "/%09/evil.example",
    "/.//evil.example",
    "/%2e//evil.example",
    "evil.example",
    "",
    "/%E0%A4%A",
    `/${"a".repeat(5000)}`,
  ])("falls back to / for %j", (input) => {
    expect(safeRedirect(input)).toBe("/");
  });

  it("treats a missing parameter as /", () => {
    expect(safeRedirect(null)).toBe("/");
    expect(safeRedirect(undefined)).toBe("/");
  });
});
