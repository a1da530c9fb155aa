import { formatWindow } from "../core/duration.js";
import type { ResolvedPolicy } from "../core/model.js";

/** What the dashboard shows of the running policy. */
export interface PolicySummary {
  readonly rules: readonly {
    readonly id: string;
    readonly tiers: readonly string[];
    readonly plans: readonly string[] | undefined;
    readonly path: string;
    readonly methods: readonly string[] | undefined;
    readonly key: string;
    readonly limit: number;
    readonly window: string;
    readonly algorithm: string;
    readonly action: string;
    readonly shadow: boolean;
    readonly failMode: string;
  }[];
  readonly failClosedPaths: readonly string[];
  readonly budgetMs: number;
  readonly clientAddress: string;
}

/** The running policy as the dashboard and `/api/state` show it. */
export function summarize(policy: ResolvedPolicy): PolicySummary {
  const ip = policy.identity.ip;
  return {
    rules: policy.rules.map((rule) => ({
      id: rule.id,
      tiers: rule.tiers,
      plans: rule.plans,
      path: rule.pathPrefix ?? "*",
      methods: rule.methods,
      key: rule.key,
      limit: rule.limit,
      window: formatWindow(rule.window),
      algorithm: rule.algorithm,
      action:
        rule.action === "challenge" ? `challenge < ${rule.challengeBand}x, then block` : "block",
      shadow: rule.shadow,
      failMode: rule.failMode,
    })),
    failClosedPaths: policy.failClosedPaths,
    budgetMs: policy.budgetMs,
    clientAddress:
      ip.source === "x-forwarded-for"
        ? `X-Forwarded-For from ${ip.trustedProxies.join(", ") || "nobody"}`
        : ip.source === "header"
          ? `header ${ip.header}`
          : "socket peer",
  };
}
