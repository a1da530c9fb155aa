import { describe, expect, it } from "vitest";
import { GenerationalCache } from "../../src/core/generational-cache.js";

describe("generational cache", () => {
  it("never holds more than two generations", () => {
    const cache = new GenerationalCache<number>(1000);
    for (let i = 0; i < 100_000; i++) cache.set(`k${i}`, i);
    expect(cache.size).toBeLessThanOrEqual(2000);
    // The last generation's worth of keys is always there.
    for (let i = 99_000; i < 100_000; i++) expect(cache.get(`k${i}`)).toBe(i);
  });

  it("keeps a key that is read while fresh keys stream past", () => {
    const cache = new GenerationalCache<string>(100);
    cache.set("busy", "kept");
    for (let i = 0; i < 10_000; i++) {
      cache.set(`fresh${i}`, "x");
      if (i % 50 === 0) expect(cache.get("busy")).toBe("kept");
    }
    expect(cache.get("busy")).toBe("kept");
    expect(cache.get("fresh0")).toBeUndefined();
  });

  it("forgets a deleted key in both generations", () => {
    const cache = new GenerationalCache<number>(2);
    cache.set("a", 1);
    cache.set("b", 2);
    cache.set("c", 3);
    cache.delete("a");
    cache.delete("c");
    expect(cache.get("a")).toBeUndefined();
    expect(cache.get("c")).toBeUndefined();
    expect(cache.get("b")).toBe(2);
  });
});
