import { describe, expect, it } from "vitest";
import type { Override } from "../../src/core/overrides.js";
import { OverrideBoard, SHOWN_OVERRIDES } from "../../src/ops/override-board.js";

const NOW = 1_700_000_000_000;

function override(subject: string, until?: number, setAt = NOW - 1_000): Override {
  return {
    subject,
    scope: "all",
    effect: "allow",
    setAt,
    ...(until === undefined ? {} : { until }),
  };
}

describe("OverrideBoard", () => {
  it("shows those in force, soonest to expire first and those without expiry last, newest first", () => {
    const held = [
      override("user:forever-old", undefined, NOW - 5_000),
      override("user:later", NOW + 60_000),
      override("user:expired", NOW - 1),
      override("user:forever-new", undefined, NOW - 10),
      override("user:soon", NOW + 1_000),
    ];
    const board = new OverrideBoard(() => held);
    const figures = board.figures(NOW);
    expect(figures.kept).toBe(true);
    expect(figures.active).toBe(4);
    expect(figures.shown.map((o) => o.subject)).toEqual([
      "user:soon",
      "user:later",
      "user:forever-new",
      "user:forever-old",
    ]);
    // At its `until` an override stops counting, with no refresh, as the counting step skips it.
    expect(board.active(NOW + 1_000)).toBe(3);
  });

  it("says when the server reads no overrides at all", () => {
    expect(new OverrideBoard(() => undefined).figures(NOW)).toEqual({
      kept: false,
      active: 0,
      shown: [],
    });
  });

  it("counts every override in force but carries only the first ones", () => {
    const held = Array.from({ length: SHOWN_OVERRIDES + 50 }, (_, i) =>
      override(`user:u${i}`, NOW + 1_000 + i),
    );
    const figures = new OverrideBoard(() => held).figures(NOW);
    expect(figures.active).toBe(SHOWN_OVERRIDES + 50);
    expect(figures.shown).toHaveLength(SHOWN_OVERRIDES);
    expect(figures.shown[0]?.subject).toBe("user:u0");
  });
});
