/**
 * What edgelimit adds to an envoyproxy/ratelimit descriptor, written where that service's
 * loader accepts anything and reads nothing: the descriptor's `metadata`, under `edgelimit`.
 *
 *   - key: remote_address
 *     rate_limit: { unit: minute, requests_per_unit: 60 }
 *     metadata:
 *       edgelimit:
 *         algorithm: sliding-window      # or token-bucket; default fixed-window, as envoyproxy/ratelimit
 *         window: 5m                     # any length instead of the unit's
 *         failMode: closed               # what a failed store means for this descriptor
 *         counting: hybrid               # a busy descriptor spends capacity reserved ahead
 *         limits:                        # more limits on the same descriptor, all enforced
 *           - { limit: 1000, window: 1h }
 *
 * The same file still loads in envoyproxy/ratelimit, which then counts the fixed `unit` window
 * only; a file without the block means here what it means there.
 */
import { z } from "zod";
import { parseWindow } from "../core/duration.js";
import type { PolicyIssue } from "../core/errors.js";
import type { ResolvedRule } from "../core/model.js";
import type { AlgorithmName, WindowSpec } from "../core/types.js";
import { BUILT_IN } from "../policy/resolve.js";
import { ruleOptionIssues } from "../policy/rule-options.js";
import { limitNumber, ruleOptions } from "../policy/schema.js";

/** One limit a descriptor is held to, beside or instead of its `rate_limit`. */
export interface ExtraLimit {
  readonly limit: number;
  readonly window: WindowSpec;
  readonly algorithm: AlgorithmName;
}

export interface DescriptorExtension {
  readonly algorithm: AlgorithmName;
  /** Replaces the `unit`'s length when set. */
  readonly window: WindowSpec | undefined;
  readonly failMode: ResolvedRule["failMode"];
  /** Every limit of the descriptor is counted so (core/hybrid-counting.ts for `hybrid`). */
  readonly counting: ResolvedRule["counting"];
  readonly limits: readonly ExtraLimit[];
}

const extraLimitSpec = z.strictObject({
  limit: limitNumber,
  window: ruleOptions.window.unwrap(),
  algorithm: ruleOptions.algorithm,
});

const extensionSpec = z.strictObject({
  algorithm: ruleOptions.algorithm,
  window: ruleOptions.window,
  failMode: ruleOptions.failMode,
  counting: ruleOptions.counting,
  limits: z.array(extraLimitSpec).optional(),
});

const A_SECOND: WindowSpec = { ms: 1000 };

export const NO_EXTENSION: DescriptorExtension = {
  algorithm: BUILT_IN.algorithm,
  window: undefined,
  failMode: BUILT_IN.failMode,
  counting: BUILT_IN.counting,
  limits: [],
};

/**
 * The `edgelimit` block of a descriptor's metadata, checked with the policy's own rules for
 * these options (the same names, durations and algorithms as a policy file).
 */
export function readExtension(
  metadata: Readonly<Record<string, unknown>> | undefined,
  at: { readonly file: string; readonly line: number; readonly path: string },
): { extension: DescriptorExtension; issues: PolicyIssue[] } {
  const block = metadata?.edgelimit;
  if (block === undefined) return { extension: NO_EXTENSION, issues: [] };
  const parsed = extensionSpec.safeParse(block);
  if (!parsed.success) {
    return {
      extension: NO_EXTENSION,
      issues: parsed.error.issues.map((issue) => ({
        file: at.file,
        line: at.line,
        path: [at.path, "metadata", "edgelimit", ...issue.path.map(String)].join("."),
        message: issue.message,
        code: "EL_RLS_CONFIG",
      })),
    };
  }
  const spec = parsed.data;
  const algorithm = spec.algorithm ?? BUILT_IN.algorithm;
  const counting = spec.counting ?? BUILT_IN.counting;
  const window = spec.window === undefined ? undefined : parseWindow(spec.window);
  const limits = (spec.limits ?? []).map((extra) => ({
    limit: extra.limit,
    window: parseWindow(extra.window),
    algorithm: extra.algorithm ?? algorithm,
  }));
  const issues: PolicyIssue[] = [];
  const check = (checked: WindowSpec, checkedAlgorithm: AlgorithmName, path: string[]): void => {
    const options = { ...BUILT_IN, algorithm: checkedAlgorithm, counting };
    for (const issue of ruleOptionIssues(options, checked, [
      at.path,
      "metadata",
      "edgelimit",
      ...path,
    ])) {
      issues.push({
        file: at.file,
        line: at.line,
        path: issue.path.join("."),
        message: issue.message,
        code: "EL_RLS_CONFIG",
      });
    }
  };
  // Without a window of its own the limit counts the unit's, at least a second and never in
  // months: the window checks pass, and the others (hybrid with a token bucket) still apply.
  check(window ?? A_SECOND, algorithm, []);
  limits.forEach((extra, index) => {
    check(extra.window, extra.algorithm, [`limits[${index}]`]);
  });
  return {
    extension: {
      algorithm,
      window,
      failMode: spec.failMode ?? BUILT_IN.failMode,
      counting,
      limits,
    },
    issues,
  };
}
