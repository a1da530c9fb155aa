/** The checks of a rule's options that the schema cannot express (combinations of options). */
import type { WindowSpec } from "../core/types.js";
import type { RawIssue } from "./raw-issue.js";
import type { RuleOptions } from "./schema.js";

type Merged = Required<Omit<RuleOptions, "backend">> & Pick<RuleOptions, "backend">;

export function ruleOptionIssues(
  merged: Merged,
  window: WindowSpec,
  path: readonly (string | number)[],
): RawIssue[] {
  const issues: RawIssue[] = [];
  if ("months" in window && merged.algorithm !== "fixed-window") {
    issues.push({
      path: [...path, "window"],
      code: "EL_POLICY_BAD_WINDOW",
      message: `a window in calendar months needs algorithm fixed-window (got ${merged.algorithm}); use fixed-window, or a window in days`,
    });
  }
  if ("ms" in window && window.ms < 1000) {
    issues.push({
      path: [...path, "window"],
      code: "EL_POLICY_BAD_WINDOW",
      message: `a window must be at least 1s (got ${window.ms}ms)`,
    });
  }
  if (merged.action === "challenge" && merged.algorithm === "token-bucket") {
    issues.push({
      path: [...path, "action"],
      code: "EL_POLICY_INVALID",
      message:
        "challenge needs a windowed algorithm (fixed-window or sliding-window), not token-bucket",
    });
  }
  if (merged.counting === "hybrid" && merged.algorithm === "token-bucket") {
    issues.push({
      path: [...path, "counting"],
      code: "EL_POLICY_INVALID",
      message:
        "counting: hybrid needs a windowed algorithm (fixed-window or sliding-window), not token-bucket",
    });
  }
  if (merged.counting === "hybrid" && merged.backend === "approximate") {
    issues.push({
      path: [...path, "counting"],
      code: "EL_POLICY_INVALID",
      message:
        "counting: hybrid reserves capacity in an exact counter; the Workers binding (backend: approximate) is already counted in place. Use backend: exact, or counting: exact",
    });
  }
  return issues;
}
