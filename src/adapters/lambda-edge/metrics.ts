import type { ResolvedPolicy } from "../../core/model.js";
import { checkArgument, checkOptions, type OptionsShape, POLICY } from "../../core/options.js";
import type { Reason } from "../../core/types.js";
import type { Verdict } from "../../http/respond.js";

export interface EmfOptions {
  /** CloudWatch namespace (default `edgelimit`). */
  readonly namespace?: string;
  /** Where lines go (default `console.log`, which Lambda ships to CloudWatch Logs). */
  readonly write?: (line: string) => void;
}

/** The run-time check's view of `EmfOptions` (see core/options.ts). */
export const EMF_OPTIONS = {
  namespace: "string",
  write: "function",
} satisfies OptionsShape<EmfOptions>;

/** Every reason's metric: a reason added to the core without one here does not compile. */
const METRIC_BY_OUTCOME: Record<Reason, string> = {
  "within-limit": "Allowed",
  allowlisted: "Allowed",
  "no-rule": "Allowed",
  "over-limit": "Blocked",
  "blocked-cached": "Blocked",
  denylisted: "Blocked",
  "override-block": "Blocked",
  "override-allow": "Allowed",
  "challenge-band": "Challenged",
  "store-failed-open": "FailedOpen",
  "store-failed-closed": "FailedClosed",
  "store-failed-local": "FailedLocal",
};

/**
 * CloudWatch Embedded Metric Format: one JSON log line per decision becomes a count metric by
 * tier and path without any API call. The path dimension is the matched rule's path prefix
 * (`/api/reports`) or `global`, never the raw URI, so an attacker cannot mint metrics.
 */
export function emfRecorder(
  policy: ResolvedPolicy,
  options: EmfOptions = {},
): (verdict: Verdict) => void {
  if (typeof EDGELIMIT_BUNDLE === "undefined") {
    checkArgument("emfRecorder", "the policy (first argument)", policy, POLICY);
    checkOptions("emfRecorder", options, EMF_OPTIONS);
  }
  const namespace = options.namespace ?? "edgelimit";
  const write = options.write ?? ((line: string) => console.log(line));
  const prefixByRule = new Map<string, string>();
  for (const rule of policy.rules) prefixByRule.set(rule.id, rule.pathPrefix ?? "global");
  return (verdict) => {
    const metric = METRIC_BY_OUTCOME[verdict.reason];
    let path = "global";
    for (const outcome of verdict.outcomes) {
      const prefix = prefixByRule.get(outcome.ruleId);
      if (prefix !== undefined && prefix !== "global") {
        path = prefix;
        break;
      }
    }
    write(
      JSON.stringify({
        _aws: {
          Timestamp: Date.now(),
          CloudWatchMetrics: [
            {
              Namespace: namespace,
              Dimensions: [["Tier", "Path"]],
              Metrics: [{ Name: metric, Unit: "Count" }],
            },
          ],
        },
        Tier: verdict.tier,
        Path: path,
        [metric]: 1,
        rule: verdict.rule,
        reason: verdict.reason,
      }),
    );
  };
}
