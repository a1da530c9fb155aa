import { parseArgs } from "node:util";
import { formatWindow } from "../core/duration.js";
import { EdgelimitError } from "../core/errors.js";
import { formatIssue, loadPolicy } from "../policy/load.js";
import type { ResolvedPolicy, ResolvedRule } from "../policy/types.js";

const TARGETS = ["any", "cloudflare"] as const;

/**
 * `edgelimit check FILE [--json] [--target cloudflare]`: validates a policy and prints the rules
 * it resolves to. A target adds that platform's own limits (the Workers binding counts over 10
 * or 60 s only).
 */
export async function run(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      json: { type: "boolean", default: false },
      target: { type: "string", default: "any" },
    },
  });
  const file = positionals[0];
  const target = values.target as (typeof TARGETS)[number];
  if (file === undefined || positionals.length > 1 || !TARGETS.includes(target)) {
    process.stderr.write(`Usage: edgelimit check FILE [--json] [--target ${TARGETS.join("|")}]\n`);
    return 2;
  }
  let policy: ResolvedPolicy;
  try {
    policy = loadPolicy(file);
  } catch (error) {
    if (error instanceof EdgelimitError) {
      process.stderr.write(`${file}: invalid policy (${error.code})\n`);
      for (const issue of error.issues) process.stderr.write(`  ${formatIssue(issue)}\n`);
      if (error.issues.length === 0) process.stderr.write(`  ${error.message}\n`);
      return 1;
    }
    throw error;
  }
  if (target === "cloudflare") {
    const { checkCloudflarePolicy } = await import("../adapters/cloudflare/check.js");
    const issues = checkCloudflarePolicy(policy);
    if (issues.length > 0) {
      process.stderr.write(`${file}: not runnable on Cloudflare\n`);
      for (const issue of issues) process.stderr.write(`  ${formatIssue(issue)}\n`);
      return 1;
    }
  }
  if (values.json) {
    process.stdout.write(`${JSON.stringify(policy, null, 2)}\n`);
    return 0;
  }
  process.stdout.write(describePolicy(file, policy));
  return 0;
}

export function describePolicy(file: string, policy: ResolvedPolicy): string {
  const rows = policy.rules.map((rule) => [
    rule.id,
    who(rule),
    where(rule),
    `${rule.limit} / ${formatWindow(rule.window)}`,
    rule.algorithm,
    action(rule),
    rule.failMode === "closed" || isFailClosedRule(rule, policy) ? "closed" : "open",
  ]);
  const header = ["rule", "counts", "applies to", "limit", "algorithm", "over limit", "store down"];
  const widths = header.map((title, column) =>
    Math.max(title.length, ...rows.map((row) => (row[column] as string).length)),
  );
  const line = (cells: string[]) =>
    cells
      .map((cell, column) => cell.padEnd(widths[column] as number))
      .join("  ")
      .trimEnd();
  const out = [
    `${file}: ok, ${policy.rules.length} rule${policy.rules.length === 1 ? "" : "s"}`,
    "",
    line(header),
    ...rows.map(line),
    "",
    `client address: ${policy.identity.ip.source}${policy.identity.ip.header ? ` (${policy.identity.ip.header})` : ""}, trusted proxies ${policy.identity.ip.trustedProxies.join(", ") || "none"}, IPv6 counted per /${policy.identity.ip.ipv6Prefix}`,
    `users: ${users(policy)}`,
  ];
  if (policy.failClosedPaths.length > 0)
    out.push(`fail closed (503) on: ${policy.failClosedPaths.join(", ")}`);
  if (policy.allowlist.length > 0) out.push(`allowlist: ${policy.allowlist.join(", ")}`);
  if (policy.denylist.length > 0) out.push(`denylist: ${policy.denylist.join(", ")}`);
  out.push(
    `decision time budget: ${policy.budgetMs} ms of store time (connection setup: ${policy.connectBudgetMs} ms)`,
    "",
  );
  return out.join("\n");
}

function who(rule: ResolvedRule): string {
  const tiers = rule.tiers.length === 2 ? "everyone" : rule.tiers[0];
  const plans = rule.plans === undefined ? "" : ` plan ${rule.plans.join("|")}`;
  return `${tiers}${plans} by ${rule.key}`;
}

function where(rule: ResolvedRule): string {
  const methods = rule.methods === undefined ? "" : `${rule.methods.join("|")} `;
  return `${methods}${rule.pathPrefix ?? "any path"}`;
}

function action(rule: ResolvedRule): string {
  const base =
    rule.action === "challenge" ? `challenge < ${rule.challengeBand}x, then block` : "block";
  const extras = [
    rule.shadow ? "shadow" : undefined,
    rule.disclose ? undefined : "no disclosure",
    rule.backend,
  ].filter(Boolean);
  return extras.length > 0 ? `${base} (${extras.join(", ")})` : base;
}

function isFailClosedRule(rule: ResolvedRule, policy: ResolvedPolicy): boolean {
  return (
    rule.pathPrefix !== undefined &&
    policy.failClosedPaths.some((prefix) => rule.pathPrefix?.startsWith(prefix))
  );
}

function users(policy: ResolvedPolicy): string {
  const { jwt, trustedHeader } = policy.identity;
  const parts: string[] = [];
  if (jwt !== undefined) {
    parts.push(
      `JWT ${jwt.algorithms.join("/")} from ${jwt.from}, user in "${jwt.userClaim}"${jwt.planClaim ? `, plan in "${jwt.planClaim}"` : ""}`,
    );
  }
  if (trustedHeader !== undefined) {
    parts.push(`header ${trustedHeader.user} (trusted from ${trustedHeader.from})`);
  }
  return parts.length > 0 ? parts.join("; ") : "none (everyone is anonymous)";
}
