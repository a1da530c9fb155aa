/**
 * Warnings for valid policies that leave traffic unprotected without saying so: a tier that no
 * rule counts, tokens that match no rule, fail-closed paths that no rule covers (no rule, no
 * store call, so no 503 either), plan filters naming no plan, prefixes that overlap. `check`
 * prints them with their lines; `check --strict` makes them errors.
 */
import type { ResolvedPolicy, ResolvedRule } from "../core/model.js";
import { matchesPrefix } from "../core/path.js";
import type { Tier } from "../core/types.js";
import type { RawIssue } from "./raw-issue.js";

export function policyWarnings(policy: ResolvedPolicy): RawIssue[] {
  const warnings: RawIssue[] = [];
  const identifiesUsers =
    policy.identity.jwt !== undefined ||
    policy.identity.trustedHeader !== undefined ||
    policy.identity.application === true;
  const tiers: Tier[] = identifiesUsers ? ["anonymous", "authenticated"] : ["anonymous"];
  const enforcing = policy.rules.filter((rule) => !rule.shadow);
  const forTier = (tier: Tier) => enforcing.filter((rule) => rule.tiers.includes(tier));

  // Tiers whose only rules come from namespaces, by the paths those rules cover: said once, at
  // `namespaces`, since the file may have no `tiers` section to point at.
  const namespaceOnly = new Map<string, Tier[]>();
  for (const tier of tiers) {
    const rules = forTier(tier);
    if (rules.length === 0) {
      warnings.push({
        path: ["tiers", tier],
        code: "EL_POLICY_UNLIMITED",
        message: `no rule counts ${tier} requests: their traffic is unlimited; add tiers.${tier}.global`,
      });
      continue;
    }
    // A request outside every rule's path (and plan) is counted by none.
    const everywhere = rules.some(
      (rule) => rule.pathPrefix === undefined && rule.methods === undefined && !planOnly(rule),
    );
    if (!everywhere && !rules.some((rule) => rule.id.startsWith(`${tier}.`))) {
      const covered = coverage(rules);
      namespaceOnly.set(covered, [...(namespaceOnly.get(covered) ?? []), tier]);
    } else if (!everywhere) {
      warnings.push({
        path: ["tiers", tier],
        code: "EL_POLICY_UNLIMITED",
        message: `no ${tier} rule applies to every path: requests elsewhere are unlimited; add tiers.${tier}.global`,
      });
    }
  }

  for (const [covered, uncovered] of namespaceOnly) {
    warnings.push({
      path: ["namespaces"],
      code: "EL_POLICY_UNLIMITED",
      message: `no rule applies to every path: ${uncovered.join(" and ")} requests outside ${covered} are counted by no rule, so they are unlimited; if they should be limited, add ${uncovered.map((tier) => `tiers.${tier}.global`).join(" and ")}, or a namespace without match.path`,
    });
  }

  if (identifiesUsers) {
    const plans = policy.rules.filter((rule) => rule.plans !== undefined);
    const withoutPlan = forTier("authenticated").filter((rule) => rule.plans === undefined);
    if (plans.length > 0 && withoutPlan.length === 0) {
      warnings.push({
        path: ["tiers", "authenticated", "plans"],
        code: "EL_POLICY_UNLIMITED",
        message:
          "a verified user whose token carries no plan matches no rule (unlimited): add tiers.authenticated.global",
      });
    }
    // The plans the tier defines; a filter naming another is a typo or a plan tokens never carry.
    const defined = new Set(
      policy.rules
        .filter((rule) => rule.id.startsWith("authenticated.plan."))
        .flatMap((rule) => rule.plans ?? []),
    );
    if (defined.size > 0) {
      for (const rule of policy.rules) {
        if (rule.id.startsWith("authenticated.plan.")) continue;
        const unknown = (rule.plans ?? []).filter((plan) => !defined.has(plan));
        if (unknown.length > 0) {
          warnings.push({
            path: pathOf(rule),
            code: "EL_POLICY_UNLIMITED",
            message: `rule ${rule.id} is for plan ${unknown.join(", ")}, which tiers.authenticated.plans does not define (it has ${[...defined].join(", ")}): if no token carries that plan, the rule never applies`,
          });
        }
      }
    }
  }

  for (const rule of policy.rules) {
    if (rule.failMode !== "open" || rule.shadow) continue;
    warnings.push({
      path: [...pathOf(rule), "failMode"],
      code: "EL_POLICY_UNLIMITED",
      message: `rule ${rule.id} fails open: while the store is down its requests are not limited at all; failMode: local (the default) counts them in each process instead`,
    });
  }

  policy.failClosedPaths.forEach((prefix, index) => {
    for (const tier of tiers) {
      const covered = forTier(tier).some(
        (rule) =>
          rule.methods === undefined &&
          !planOnly(rule) &&
          (rule.pathPrefix === undefined || matchesPrefix(prefix, rule.pathPrefix)),
      );
      if (!covered) {
        warnings.push({
          path: ["failClosed", index],
          code: "EL_POLICY_UNLIMITED",
          message: `${tier} requests under ${prefix} match no rule, so they never reach the store and are allowed even when it is down (no 503); add a rule that covers ${prefix}`,
        });
      }
    }
  });

  const byGroup = new Map<string, ResolvedRule[]>();
  for (const rule of policy.rules) {
    if (rule.pathPrefix === undefined) continue;
    const key = `${rule.group}\u0000${(rule.plans ?? []).join(",")}\u0000${(rule.methods ?? []).join(",")}`;
    byGroup.set(key, [...(byGroup.get(key) ?? []), rule]);
  }
  for (const rules of byGroup.values()) {
    for (const [i, first] of rules.entries()) {
      for (const second of rules.slice(i + 1)) {
        // Prefixes are canonical (core/path.ts): `/é` and `/%C3%A9` are already one.
        const a = (first.pathPrefix as string).replace(/\/$/, "");
        const b = (second.pathPrefix as string).replace(/\/$/, "");
        const same = `only one of ${second.id} and ${first.id} ever applies; keep one`;
        if (a === b) {
          warnings.push({
            path: pathOf(second),
            code: "EL_POLICY_OVERLAP",
            message: `${second.pathPrefix} and ${first.pathPrefix} name the same path (a prefix matches with or without its trailing slash, however its escapes are written): ${same}`,
          });
        } else if (policy.paths.caseSensitive !== true && a.toLowerCase() === b.toLowerCase()) {
          warnings.push({
            path: pathOf(second),
            code: "EL_POLICY_OVERLAP",
            message: `${second.pathPrefix} and ${first.pathPrefix} differ in letter case only, which paths match in unless the origin routes case exactly: ${same}, or set paths.caseSensitive: true if the origin tells them apart`,
          });
        }
      }
    }
  }
  return warnings;
}

/**
 * The paths some rules count, for a warning: `POST /login, /api/`. A path a plan's rule counts is
 * named with its plan (`/api/ (plan free)`) unless a rule for every plan counts it too.
 */
function coverage(rules: readonly ResolvedRule[]): string {
  const where = (rule: ResolvedRule) =>
    `${rule.methods === undefined ? "" : `${rule.methods.join("|")} `}${rule.pathPrefix ?? "every path"}`;
  const forAll = new Set(rules.filter((rule) => !planOnly(rule)).map(where));
  const forPlans = rules
    .filter((rule) => planOnly(rule) && !forAll.has(where(rule)))
    .map((rule) => `${where(rule)} (plan ${(rule.plans ?? []).join("|")})`);
  return [...new Set([...forAll, ...forPlans])].join(", ");
}

/** A rule that applies only to the users of some plans. */
function planOnly(rule: ResolvedRule): boolean {
  return rule.plans !== undefined;
}

/** Where a rule is written, for the warning's line: `tiers.anonymous.paths./api/x` and the like. */
function pathOf(rule: ResolvedRule): (string | number)[] {
  const [first, ...rest] = rule.id.split(".");
  if (first === "anonymous" || first === "authenticated") {
    const [kind, ...name] = rest;
    if (kind === "path") return ["tiers", first, "paths", name.join(".")];
    if (kind === "plan") return ["tiers", first, "plans", name.join(".")];
    return ["tiers", first];
  }
  return ["namespaces", first as string];
}
