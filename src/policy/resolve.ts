import { MAX_WAIT_MS, parseDurationMs, parseWindow } from "../core/duration.js";
import { DEFAULT_ORIGIN_HEADER, type ResolvedPolicy, type ResolvedRule } from "../core/model.js";
import { normalizePath } from "../core/path.js";
import type { Tier } from "../core/types.js";
import type { RawIssue } from "./raw-issue.js";
import { overrideRefreshMs, resolveChallenge, resolveList } from "./resolve-companions.js";
import { ruleOptionIssues } from "./rule-options.js";
import type { NamespaceSpec, PolicySpec, RuleOptions, RuleSpec, TierSpec } from "./schema.js";

/** A rule's options where neither it nor its tier, namespace or `defaults` set them. */
export const BUILT_IN: Required<Omit<RuleOptions, "backend">> = {
  window: "60s",
  counting: "exact",
  algorithm: "fixed-window",
  action: "block",
  challengeBand: 2,
  failMode: "local",
  disclose: true,
  shadow: false,
  cost: 1,
};

const DEFAULT_TRUSTED_PROXIES = ["127.0.0.0/8", "::1/128"];

/**
 * Turns a schema-valid policy into the flat list of rules the limiter runs, checking what the
 * schema cannot see (a user-keyed rule without a user identity, a calendar window on a token
 * bucket, a plan default that names no plan). Returns the issues instead of throwing, so that
 * all of them are reported at once.
 */
export function resolvePolicy(spec: PolicySpec): { policy?: ResolvedPolicy; issues: RawIssue[] } {
  const issues: RawIssue[] = [];
  const rules: ResolvedRule[] = [];
  const defaults = { ...BUILT_IN, ...stripUndefined(spec.defaults ?? {}) } as typeof BUILT_IN &
    RuleOptions;
  const userConfigured =
    spec.identity?.user?.jwt !== undefined ||
    spec.identity?.user?.trustedHeader !== undefined ||
    spec.identity?.user?.application === true;

  const add: AddRule = (rule, options, path) => {
    const merged = { ...defaults, ...stripUndefined(options) };
    const window = parseWindow(merged.window);
    issues.push(...ruleOptionIssues(merged, window, path));
    if (rule.key !== "ip" && !userConfigured && rule.tiers.includes("authenticated")) {
      if (rule.key === "user") {
        issues.push({
          path: [...path, "key"],
          code: "EL_POLICY_INVALID",
          message:
            'a rule keyed by "user" needs identity.user (jwt or trustedHeader) to be configured',
        });
      }
    }
    rules.push({
      ...rule,
      key: rule.key,
      window,
      algorithm: merged.algorithm,
      action: merged.action,
      challengeBand: merged.challengeBand,
      failMode: merged.failMode,
      disclose: merged.disclose,
      shadow: merged.shadow,
      cost: merged.cost,
      backend: merged.backend,
      counting: merged.counting,
    });
  };

  const planNames = new Set<string>();
  for (const tier of ["anonymous", "authenticated"] as const) {
    const tierSpec = spec.tiers?.[tier];
    if (tierSpec === undefined) continue;
    if (tier === "authenticated" && !userConfigured) {
      issues.push({
        path: ["tiers", "authenticated"],
        code: "EL_POLICY_INVALID",
        message:
          "the authenticated tier needs identity.user (jwt or trustedHeader); without it nobody is authenticated",
      });
    }
    if (tier === "anonymous" && tierSpec.plans !== undefined) {
      issues.push({
        path: ["tiers", "anonymous", "plans"],
        code: "EL_POLICY_INVALID",
        message: "plans belong to tiers.authenticated: anonymous clients have no plan",
      });
    }
    resolveTier(tier, tierSpec, add, planNames);
  }

  for (const [name, namespace] of Object.entries(spec.namespaces ?? {})) {
    resolveNamespace(name, namespace, add, issues);
  }
  // Plans that only namespace rules name are plans too (a JWT may carry them).
  for (const rule of rules) for (const plan of rule.plans ?? []) planNames.add(plan);

  const planDefault = spec.plans?.default;
  if (planDefault !== undefined && !planNames.has(planDefault)) {
    issues.push({
      path: ["plans", "default"],
      code: "EL_POLICY_INVALID",
      message: `names plan "${planDefault}", which tiers.authenticated.plans does not define (defined: ${[...planNames].join(", ") || "none"})`,
    });
  }

  const ids = new Set<string>();
  for (const rule of rules) {
    if (ids.has(rule.id)) {
      issues.push({
        path: ["namespaces", rule.namespace],
        code: "EL_POLICY_INVALID",
        message: `two rules resolve to the id "${rule.id}"; give them different names`,
      });
    }
    ids.add(rule.id);
  }

  const ip = spec.identity?.ip ?? {};
  const source = ip.source ?? "socket";
  if (source === "header" && ip.header === undefined) {
    issues.push({
      path: ["identity", "ip", "header"],
      code: "EL_POLICY_INVALID",
      message: 'source "header" needs the header name, for example header: cf-connecting-ip',
    });
  }
  const jwt = spec.identity?.user?.jwt;
  const algorithms = jwt?.algorithms ?? ["HS256"];
  if (jwt !== undefined) {
    const symmetric = algorithms.every((algorithm) => algorithm.startsWith("HS"));
    const asymmetric = algorithms.every((algorithm) => !algorithm.startsWith("HS"));
    if (!symmetric && !asymmetric) {
      issues.push({
        path: ["identity", "user", "jwt", "algorithms"],
        code: "EL_POLICY_INVALID",
        message:
          "mix HMAC (HS*) and public-key algorithms in separate policies; a key serves one kind",
      });
    } else if (symmetric && jwt.secret === undefined) {
      issues.push({
        path: ["identity", "user", "jwt", "secret"],
        code: "EL_POLICY_INVALID",
        message: "HS* algorithms need a secret, for example secret: { env: EDGELIMIT_JWT_SECRET }",
      });
    } else if (asymmetric && jwt.publicKey === undefined) {
      issues.push({
        path: ["identity", "user", "jwt", "publicKey"],
        code: "EL_POLICY_INVALID",
        message:
          "RS256/ES256/EdDSA need a publicKey (PEM, SPKI), for example publicKey: { file: keys/jwt.pub }",
      });
    }
  }

  if (issues.length > 0) return { issues };
  const trustedHeader = spec.identity?.user?.trustedHeader;
  return {
    issues,
    policy: {
      version: 1,
      identity: {
        ip: {
          source: source,
          header: ip.header?.toLowerCase(),
          trustedProxies: ip.trustedProxies ?? DEFAULT_TRUSTED_PROXIES,
          ipv6Prefix: ip.ipv6Prefix ?? 64,
        },
        jwt:
          jwt === undefined
            ? undefined
            : {
                algorithms,
                secret: jwt.secret,
                publicKey: jwt.publicKey,
                issuer: jwt.issuer,
                audience: jwt.audience,
                userClaim: jwt.userClaim ?? "sub",
                planClaim: jwt.planClaim,
                from: jwt.from ?? "authorization",
                clockToleranceSeconds: Math.round(
                  parseDurationMs(jwt.clockTolerance ?? "5s") / 1000,
                ),
              },
        trustedHeader:
          trustedHeader === undefined
            ? undefined
            : {
                user: trustedHeader.user.toLowerCase(),
                plan: trustedHeader.plan?.toLowerCase(),
                from: trustedHeader.from ?? "trusted-proxies",
              },
        application: spec.identity?.user?.application === true,
      },
      rules,
      paths: { caseSensitive: spec.paths?.caseSensitive },
      plans: { names: [...planNames], default: planDefault },
      failClosedPaths: (spec.failClosed ?? []).map(normalizePath),
      allowlist: spec.allowlist ?? [],
      denylist: spec.denylist ?? [],
      challenge: resolveChallenge(spec.challenge),
      lists: (spec.lists ?? []).map(resolveList),
      budgetMs: parseDurationMs(spec.budget ?? 50, { bareMilliseconds: true, maxMs: MAX_WAIT_MS }),
      connectBudgetMs: parseDurationMs(spec.connectBudget ?? "1s", { maxMs: MAX_WAIT_MS }),
      unavailableRetryAfterSeconds: Math.max(
        1,
        Math.round(parseDurationMs(spec.unavailableRetryAfter ?? "5s") / 1000),
      ),
      overrides: spec.overrides && {
        maxLimit: spec.overrides.maxLimit,
        rules: spec.overrides.rules,
        refreshMs: overrideRefreshMs(spec.overrides.refresh),
      },
      headers: {
        legacy: spec.headers?.legacy ?? true,
        draft: spec.headers?.draft ?? true,
        origin: (spec.headers?.origin ?? DEFAULT_ORIGIN_HEADER).toLowerCase(),
      },
    },
  };
}

/** What a rule is before the options (its own, its tier's or namespace's, the defaults) apply. */
type RuleShape = Omit<
  ResolvedRule,
  | "window"
  | "algorithm"
  | "action"
  | "challengeBand"
  | "failMode"
  | "disclose"
  | "shadow"
  | "cost"
  | "backend"
  | "counting"
>;

type AddRule = (rule: RuleShape, options: RuleOptions, path: (string | number)[]) => void;

function resolveTier(tier: Tier, spec: TierSpec, add: AddRule, planNames: Set<string>): void {
  const key = spec.key ?? (tier === "anonymous" ? "ip" : "user");
  const tierOptions = pickOptions(spec);
  const base = { namespace: tier, tiers: [tier], methods: undefined, key } as const;
  if (spec.global !== undefined) {
    add(
      {
        ...base,
        id: `${tier}.global`,
        scope: "global",
        group: `${tier}.global`,
        plans: undefined,
        pathPrefix: undefined,
        limit: spec.global.limit,
      },
      { ...tierOptions, ...pickOptions(spec.global) },
      ["tiers", tier, "global"],
    );
  }
  for (const [plan, rule] of Object.entries(spec.plans ?? {})) {
    planNames.add(plan);
    // A plan replaces the tier's global limit; it counts on the same counter, so a user who
    // upgrades mid-window keeps the count they have.
    add(
      {
        ...base,
        id: `${tier}.plan.${plan}`,
        scope: "global",
        group: `${tier}.global`,
        plans: [plan],
        pathPrefix: undefined,
        limit: rule.limit,
      },
      { ...tierOptions, ...pickOptions(rule) },
      ["tiers", tier, "plans", plan],
    );
  }
  for (const [prefix, rule] of Object.entries(spec.paths ?? {})) {
    add(
      {
        ...base,
        id: `${tier}.path.${prefix}`,
        scope: prefix,
        group: `${tier}.paths`,
        plans: undefined,
        // Matched in the form requests are (core/path.ts); the id and the counters keep the key
        // as written.
        pathPrefix: normalizePath(prefix),
        limit: rule.limit,
      },
      // Path rules block by default even where the tier challenges: the seed challenges only
      // on the global limit.
      { ...tierOptions, action: undefined, ...pickOptions(rule) },
      ["tiers", tier, "paths", prefix],
    );
  }
}

function resolveNamespace(
  name: string,
  spec: NamespaceSpec,
  add: AddRule,
  issues: RawIssue[],
): void {
  const nsOptions = pickOptions(spec);
  const written = spec.match?.path;
  const pathPrefix = written === undefined ? undefined : normalizePath(written);
  const methods = spec.match?.methods;
  if (spec.rules === undefined) {
    if (spec.limit === undefined) {
      issues.push({
        path: ["namespaces", name],
        code: "EL_POLICY_INVALID",
        message: "a namespace needs a limit, or a list of rules each with a limit",
      });
      return;
    }
    const key = spec.key ?? "user-or-ip";
    add(
      {
        id: name,
        namespace: name,
        scope: name,
        group: `ns.${name}`,
        tiers: spec.tiers ?? tiersFor(key),
        plans: spec.plans,
        pathPrefix,
        methods,
        key,
        limit: spec.limit,
      },
      nsOptions,
      ["namespaces", name],
    );
    return;
  }
  if (spec.limit !== undefined) {
    issues.push({
      path: ["namespaces", name, "limit"],
      code: "EL_POLICY_INVALID",
      message: "a namespace has either limit or rules, not both; move the limit into a rule",
    });
  }
  spec.rules.forEach((rule, index) => {
    const key = rule.key ?? spec.key ?? "user-or-ip";
    add(
      {
        id: `${name}.${rule.name}`,
        namespace: name,
        scope: rule.name,
        group: `ns.${name}.${rule.name}`,
        tiers: rule.tiers ?? spec.tiers ?? tiersFor(key),
        plans: rule.plans ?? spec.plans,
        pathPrefix,
        methods,
        key,
        limit: rule.limit,
      },
      { ...nsOptions, ...pickOptions(rule) },
      ["namespaces", name, "rules", index],
    );
  });
}

function tiersFor(key: "ip" | "user" | "user-or-ip"): Tier[] {
  return key === "user" ? ["authenticated"] : ["anonymous", "authenticated"];
}

const RULE_OPTION_NAMES = [
  "window",
  "algorithm",
  "action",
  "challengeBand",
  "failMode",
  "disclose",
  "shadow",
  "cost",
  "backend",
  "counting",
] as const satisfies readonly (keyof RuleOptions)[];

function pickOptions(spec: Partial<RuleSpec>): RuleOptions {
  return stripUndefined(Object.fromEntries(RULE_OPTION_NAMES.map((name) => [name, spec[name]])));
}

function stripUndefined<T extends object>(value: T): T {
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) if (item !== undefined) out[key] = item;
  return out as T;
}
