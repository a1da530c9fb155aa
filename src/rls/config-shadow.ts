/**
 * What shadow mode would have refused in a call decided by the configuration, for the metrics
 * and the dashboard (envoyproxy/ratelimit keeps a `shadow_mode` counter per descriptor and one
 * for `SHADOW_MODE`): each `shadow_mode` descriptor over its limit, and, where `SHADOW_MODE`
 * turned an OVER_LIMIT answer into OK, each descriptor that made it OVER_LIMIT (a quota only
 * when every quota of the call was over, as the answer counts them).
 */
import type { ConfiguredLimit } from "./config.js";
import { CODE, type DescriptorStatus } from "./messages.js";

const NONE: readonly string[] = Object.freeze([]);

export function shadowRefusals(
  limits: readonly (Pick<ConfiguredLimit, "shadowMode" | "quotaMode"> | undefined)[],
  statuses: readonly DescriptorStatus[],
  /** Per descriptor, the rule that binds it when it is over its limit (enforced or not). */
  overRules: readonly (string | undefined)[],
  answer: { readonly globalShadowRefused: boolean; readonly quotasRefused: boolean },
): readonly string[] {
  let found: string[] | undefined;
  overRules.forEach((rule, index) => {
    const limit = limits[index];
    if (rule === undefined || limit === undefined) return;
    const refusedGlobally =
      answer.globalShadowRefused &&
      statuses[index]?.code === CODE.OVER_LIMIT &&
      (!limit.quotaMode || answer.quotasRefused);
    if (limit.shadowMode || refusedGlobally) {
      found ??= [];
      found.push(rule);
    }
  });
  return found ?? NONE;
}
