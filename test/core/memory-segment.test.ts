import { describe, expect, it } from "vitest";
import { Segment } from "../../src/stores/memory-segment.js";

const item = () => ({ seq: 0 });

describe("memory store segment", () => {
  it("finds the oldest entry after deletions anywhere", () => {
    const segment = new Segment<{ seq: number }>();
    for (const key of ["a", "b", "c", "d"]) segment.append(key, item());
    expect(segment.oldest()?.key).toBe("a");
    segment.delete("a");
    segment.delete("c");
    expect(segment.oldest()?.key).toBe("b");
    segment.delete("b");
    expect(segment.oldest()?.key).toBe("d");
    segment.delete("d");
    expect(segment.oldest()).toBeUndefined();
    segment.append("e", item());
    expect(segment.oldest()?.key).toBe("e");
  });

  it("treats a re-appended entry as the newest", () => {
    const segment = new Segment<{ seq: number }>();
    const a = item();
    segment.append("a", a);
    segment.append("b", item());
    expect(segment.oldest()?.key).toBe("a");
    segment.delete("a");
    segment.append("a", a);
    expect(segment.oldest()?.key).toBe("b");
    segment.delete("b");
    expect(segment.oldest()?.key).toBe("a");
  });

  it("agrees with a plain ordered list over random operations", () => {
    const segment = new Segment<{ seq: number }>();
    const model: string[] = [];
    let seed = 7;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed / 2147483648;
    };
    for (let step = 0; step < 20_000; step++) {
      const key = `k${Math.floor(random() * 500)}`;
      const roll = random();
      if (roll < 0.5 && !model.includes(key)) {
        segment.append(key, item());
        model.push(key);
      } else if (roll < 0.8 && model.includes(key)) {
        segment.delete(key);
        model.splice(model.indexOf(key), 1);
      } else if (model.length > 0) {
        const oldest = segment.oldest();
        expect(oldest?.key).toBe(model[0]);
        if (roll > 0.9 && oldest !== undefined) {
          segment.delete(oldest.key);
          model.shift();
        }
      }
      expect(segment.size).toBe(model.length);
    }
  });
});
