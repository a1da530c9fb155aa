import { describe, expect, it } from "vitest";
import { type BoardDecision, DecisionBoard } from "../../src/ops/decision-board.js";

function decision(overrides: Partial<BoardDecision>): BoardDecision {
  return {
    action: "allow",
    reason: "within-limit",
    subject: "ip:192.0.2.1",
    durationMs: 1,
    shadowed: [],
    ...overrides,
  };
}

/** A clock reading well past the epoch (the rate series counts whole seconds since it). */
const NOW = 1_700_000_000_000;

describe("DecisionBoard", () => {
  it("totals decisions by action and lists only refused subjects as offenders", () => {
    const board = new DecisionBoard({ topKeysPeriodMs: 60_000 });
    const now = NOW;
    board.record(decision({ subject: "ip:192.0.2.1" }), now);
    board.record(decision({ action: "block", reason: "over-limit", subject: "ip:192.0.2.2" }), now);
    board.record(decision({ action: "block", reason: "over-limit", subject: "ip:192.0.2.2" }), now);
    board.record(decision({ action: "challenge", reason: "over-limit", subject: "user:u" }), now);

    const figures = board.figures(now);
    expect(figures.totals).toEqual({ allow: 1, block: 2, challenge: 1, unavailable: 0 });
    expect(figures.topOffenders.map(({ key, count }) => [key, count])).toEqual([
      ["ip:192.0.2.2", 2],
      ["user:u", 1],
    ]);
    expect(figures.topOffendersPeriodMs).toBe(60_000);
    expect(figures.series.at(-1)).toMatchObject({ allow: 1, block: 2, challenge: 1 });
  });

  it("counts failed-open decisions and shadow refusals by rule", () => {
    const board = new DecisionBoard({});
    board.record(decision({ reason: "store-failed-open" }), NOW);
    board.record(decision({ shadowed: ["burst", "daily"] }), NOW);
    board.record(decision({ shadowed: ["burst"] }), NOW);

    const { decisions } = board.figures(NOW);
    expect(decisions.failedOpen).toBe(1);
    expect(decisions.shadowRefusals).toBe(2);
    expect(decisions.shadowRefusalsByRule).toEqual({ burst: 2, daily: 1 });
    expect(decisions.decisionMs.count).toBe(3);
  });

  it("hands out copies: a snapshot taken earlier does not change with later decisions", () => {
    const board = new DecisionBoard({});
    const before = board.figures(NOW);
    board.record(decision({ action: "block", reason: "over-limit" }), NOW);
    expect(before.totals.block).toBe(0);
    expect(board.figures(NOW).totals.block).toBe(1);
  });
});
