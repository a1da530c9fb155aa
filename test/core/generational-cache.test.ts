import { describe, expect, it } from "vitest";
import { CHARS_PER_KEY, GenerationalCache } from "../../src/core/generational-cache.js";

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

  it("is bounded in characters when clients choose long keys (64 KiB descriptor values)", () => {
    const cache = new GenerationalCache<number>(1000);
    const long = "x".repeat(64 * 1024);
    let held = 0;
    for (let i = 0; i < 200; i++) cache.set(`${long}${i}`, i);
    for (let i = 0; i < 200; i++) if (cache.get(`${long}${i}`) !== undefined) held++;
    // Two generations of at most 1000 x 512 characters each, and one key over.
    const perGeneration = Math.ceil((1000 * CHARS_PER_KEY) / long.length) + 1;
    expect(held).toBeLessThanOrEqual(2 * perGeneration);
    expect(cache.get(`${long}199`)).toBe(199);
  });

  it("counts a key's length once, however often a busy key is set", () => {
    const cache = new GenerationalCache<number>(10);
    cache.set("cold", 0);
    const busy = "b".repeat(CHARS_PER_KEY * 4);
    for (let i = 0; i < 1000; i++) cache.set(busy, i);
    expect(cache.get("cold")).toBe(0);
  });
});
