import { describe, expect, it } from "vitest";
import { subjectKey } from "../../src/core/keys.js";
import { readableSubject } from "../../src/replay/report.js";

describe("replay report", () => {
  it("shows subjects as people write them, not as encoded counter keys", () => {
    expect(readableSubject(subjectKey("ip", "2001:db8:4a::/64"))).toBe("ip:2001:db8:4a::/64");
    expect(readableSubject(subjectKey("user", "a|b:c"))).toBe("user:a|b:c");
    expect(readableSubject("ip:%E0%A4%A")).toBe("ip:%E0%A4%A");
  });
});
