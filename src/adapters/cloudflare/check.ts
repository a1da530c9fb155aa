import type { PolicyIssue } from "../../core/errors.js";
import type { ResolvedPolicy, ResolvedRule } from "../../core/model.js";

/** The only periods the native `ratelimits` binding accepts, in seconds. */
export const BINDING_PERIODS_SECONDS: readonly number[] = [10, 60];

/** Which backend counts a rule on Cloudflare. A rule that names none goes to the exact counter. */
export function backendOf(rule: Pick<ResolvedRule, "backend">): "approximate" | "exact" {
  return rule.backend ?? "exact";
}

/** The ids of the rules the native binding counts, for `CloudflareStoreOptions.approximate`. */
export function approximateRules(policy: { readonly rules: readonly ResolvedRule[] }): string[] {
  return policy.rules.filter((rule) => backendOf(rule) === "approximate").map((rule) => rule.id);
}

/**
 * The limit each approximate rule's binding holds, by rule id, for
 * `CloudflareStoreOptions.bindingLimits`: the rule's own (wrangler.toml must say the same).
 */
export function bindingLimits(policy: {
  readonly rules: readonly ResolvedRule[];
}): Record<string, number> {
  const limits: Record<string, number> = {};
  for (const rule of policy.rules)
    if (backendOf(rule) === "approximate") limits[rule.id] = rule.limit;
  return limits;
}

/** The binding name for an approximate rule: by rule id first, then by namespace. */
export function bindingNameFor(
  ruleId: string,
  namespace: string,
  ratelimits: Readonly<Record<string, string>>,
): string | undefined {
  if (Object.hasOwn(ratelimits, ruleId)) return ratelimits[ruleId];
  if (Object.hasOwn(ratelimits, namespace)) return ratelimits[namespace];
  return undefined;
}

/** The binding's period for a rule, or undefined when the rule's window is not one it accepts. */
export function bindingPeriodSeconds(rule: Pick<ResolvedRule, "window">): number | undefined {
  if (!("ms" in rule.window)) return undefined;
  const seconds = rule.window.ms / 1000;
  return BINDING_PERIODS_SECONDS.includes(seconds) ? seconds : undefined;
}

/**
 * What a policy asks of Cloudflare that Cloudflare cannot do. The native binding is a fixed
 * counter of 10 or 60 seconds that answers only yes or no, with its limit written in
 * wrangler.toml, so an `approximate` rule must be a fixed window of 10 or 60 s, cannot challenge
 * (the challenge band needs a count), and rules sharing a binding must share its numbers.
 * When `ratelimits` (namespace or rule id -> binding name) is given, every approximate rule must
 * also have a binding. Exact rules run on the Durable Object and accept any window.
 */
export function checkCloudflarePolicy(
  policy: ResolvedPolicy,
  ratelimits?: Readonly<Record<string, string>>,
): PolicyIssue[] {
  const issues: PolicyIssue[] = [];
  const sharers = new Map<string, ResolvedRule>();
  for (const rule of policy.rules) {
    if (backendOf(rule) !== "approximate") continue;
    const at = `rules.${rule.id}`;
    const period = bindingPeriodSeconds(rule);
    if (period === undefined) {
      issues.push({
        path: `${at}.window`,
        code: "EL_POLICY_BAD_WINDOW",
        message: `rule "${rule.id}": the Cloudflare rate-limit binding (backend: approximate) counts over 10 or 60 seconds only; got ${describeWindow(rule)}. Use window: 10s or 60s, or backend: exact for a Durable Object counter.`,
      });
    }
    if (rule.algorithm !== "fixed-window") {
      issues.push({
        path: `${at}.algorithm`,
        code: "EL_POLICY_INVALID",
        message: `rule "${rule.id}": the Cloudflare rate-limit binding (backend: approximate) is a fixed window; got algorithm ${rule.algorithm}. Use algorithm: fixed-window, or backend: exact.`,
      });
    }
    if (rule.action === "challenge") {
      issues.push({
        path: `${at}.action`,
        code: "EL_POLICY_INVALID",
        message: `rule "${rule.id}": the Cloudflare rate-limit binding (backend: approximate) answers only yes or no, so it cannot tell a challenge band from a hard block. Use action: block, or backend: exact.`,
      });
    }
    const binding =
      ratelimits === undefined ? undefined : bindingNameFor(rule.id, rule.namespace, ratelimits);
    if (ratelimits !== undefined && binding === undefined) {
      issues.push({
        path: `${at}.backend`,
        code: "EL_POLICY_INVALID",
        message: `rule "${rule.id}": no rate-limit binding for namespace "${rule.namespace}"; add ratelimits: { "${rule.namespace}": "<BINDING>" } and a [[ratelimits]] entry in wrangler.toml.`,
      });
      continue;
    }
    const shared = binding ?? `namespace ${rule.namespace}`;
    const first = sharers.get(shared);
    if (first === undefined) {
      sharers.set(shared, rule);
    } else if (first.limit !== rule.limit || describeWindow(first) !== describeWindow(rule)) {
      issues.push({
        path: `${at}.limit`,
        code: "EL_POLICY_INVALID",
        message: `rule "${rule.id}": shares the rate-limit binding of rule "${first.id}" (${shared}), which has one limit and period in wrangler.toml; ${first.limit} per ${describeWindow(first)} against ${rule.limit} per ${describeWindow(rule)}. Give the rule its own binding (ratelimits: { "${rule.id}": "<BINDING>" }) or the same numbers.`,
      });
    }
  }
  return issues;
}

function describeWindow(rule: Pick<ResolvedRule, "window">): string {
  const { window } = rule;
  if ("months" in window) return `${window.months} month${window.months === 1 ? "" : "s"}`;
  return window.ms % 1000 === 0 ? `${window.ms / 1000}s` : `${window.ms}ms`;
}
