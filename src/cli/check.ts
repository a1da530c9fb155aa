import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { formatWindow } from "../core/duration.js";
import { EdgelimitError, type PolicyIssue } from "../core/errors.js";
import { matchesPrefix } from "../core/path.js";
import { formatIssue, loadPolicy, policyWarningsOf } from "../policy/load.js";
import { namedSecrets } from "../policy/secrets.js";
import type { ResolvedPolicy, ResolvedRule } from "../policy/types.js";
import { CHECK_USAGE } from "./usage.js";

const TARGETS = ["any", "cloudflare"] as const;

/**
 * `edgelimit check FILE [--json] [--target cloudflare]`: validates a policy and prints the rules
 * it resolves to. A target adds that platform's own limits (the Workers binding counts over 10
 * or 60 s only). With `--json`, errors are one JSON object on stdout, for scripts and editors.
 */
export async function run(argv: string[]): Promise<number> {
  let parsed: ReturnType<typeof parseCheckArgs>;
  try {
    parsed = parseCheckArgs(argv);
  } catch (error) {
    process.stderr.write(`edgelimit check: ${(error as Error).message}\n\n${CHECK_USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(CHECK_USAGE);
    return 0;
  }
  const file = positionals[0];
  const target = values.target as (typeof TARGETS)[number];
  if (file === undefined || positionals.length > 1 || !TARGETS.includes(target)) {
    process.stderr.write(CHECK_USAGE);
    return 2;
  }
  const failed = (code: string, heading: string, issues: readonly PolicyIssue[]): number => {
    if (values.json) {
      const report = { ok: false, file, code, issues: issues.map(issueJson) };
      process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
      return 1;
    }
    process.stderr.write(`${file}: ${heading}\n`);
    for (const issue of issues) process.stderr.write(`  ${formatIssue(issue)}\n`);
    return 1;
  };
  let policy: ResolvedPolicy;
  try {
    policy = loadPolicy(file);
  } catch (error) {
    if (error instanceof EdgelimitError) {
      const issues =
        error.issues.length > 0
          ? error.issues
          : [{ path: "", code: error.code, message: error.message }];
      return failed(error.code, `invalid policy (${error.code})`, issues);
    }
    throw error;
  }
  if (target === "cloudflare") {
    const { checkCloudflarePolicy } = await import("../adapters/cloudflare/check.js");
    const issues = checkCloudflarePolicy(policy);
    if (issues.length > 0) {
      return failed(issues[0]?.code ?? "EL_POLICY_INVALID", "not runnable on Cloudflare", issues);
    }
  }
  for (const warning of unsetSecrets(policy, process.env)) {
    process.stderr.write(`${file}: warning: ${warning}\n`);
  }
  const warnings = policyWarningsOf(readFileSync(file, "utf8"), file);
  for (const warning of warnings) {
    process.stderr.write(`${file}: warning: ${formatIssue(warning)}\n`);
  }
  if (values.strict && warnings.length > 0) {
    return failed(
      warnings[0]?.code ?? "EL_POLICY_UNLIMITED",
      `${warnings.length} warning${warnings.length === 1 ? "" : "s"} (--strict makes them errors)`,
      warnings,
    );
  }
  if (values.json) {
    process.stdout.write(`${JSON.stringify(policy, null, 2)}\n`);
    return 0;
  }
  process.stdout.write(describePolicy(file, policy));
  return 0;
}

function parseCheckArgs(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      json: { type: "boolean", default: false },
      strict: { type: "boolean", default: false },
      target: { type: "string", default: "any" },
      help: { type: "boolean", short: "h", default: false },
    },
  });
}

/** One issue with every key present, so that a script need not test for each. */
function issueJson(issue: PolicyIssue) {
  return {
    code: issue.code,
    path: issue.path,
    line: issue.line ?? null,
    column: issue.column ?? null,
    message: issue.message,
  };
}

/**
 * The policy's `{ env: NAME }` secrets that this environment does not set. A valid policy
 * whose secret is missing passes `check` and then fails `serve` or `build` on the machine
 * where it matters: say so here, as a warning (check may run where the secrets are not).
 */
export function unsetSecrets(
  policy: ResolvedPolicy,
  env: Readonly<Record<string, string | undefined>>,
): string[] {
  const warnings: string[] = [];
  for (const { path, source } of namedSecrets(policy)) {
    if (!("env" in source)) continue;
    if (env[source.env] === undefined || env[source.env] === "") {
      warnings.push(
        `${path} reads the environment variable ${source.env}, which is not set here; serve and build refuse to start without it`,
      );
    }
  }
  return warnings;
}

export function describePolicy(file: string, policy: ResolvedPolicy): string {
  const rows = policy.rules.map((rule) => [
    rule.id,
    who(rule),
    where(rule),
    `${rule.limit} / ${formatWindow(rule.window)}`,
    rule.algorithm,
    action(rule),
    storeDown(rule, policy),
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
    `paths: ${paths(policy)}`,
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
    rule.counting === "hybrid" ? "hybrid counting" : undefined,
  ].filter(Boolean);
  return extras.length > 0 ? `${base} (${extras.join(", ")})` : base;
}

/**
 * What a rule's requests get while the store is down: `closed` (503), `local` (counted in each
 * process), `open` (unlimited), or one of the latter two and `closed` by path.
 */
function storeDown(rule: ResolvedRule, policy: ResolvedPolicy): string {
  if (rule.failMode === "closed") return "closed";
  const prefix = rule.pathPrefix;
  if (prefix !== undefined && policy.failClosedPaths.some((path) => matchesPrefix(prefix, path))) {
    return "closed";
  }
  const closedUnder = policy.failClosedPaths.filter(
    (path) => prefix === undefined || matchesPrefix(path, prefix),
  );
  const mode = rule.failMode === "local" ? "local" : "open";
  return closedUnder.length === 0 ? mode : `${mode}; closed under ${closedUnder.join(", ")}`;
}

/** How rules' paths match: the letter case, which the policy or the framework decides. */
function paths(policy: ResolvedPolicy): string {
  const spellings = "escapes and matrix parameters in any spelling";
  switch (policy.paths.caseSensitive) {
    case true:
      return `letter case matters (paths.caseSensitive: true); ${spellings}`;
    case false:
      return `any letter case (paths.caseSensitive: false); ${spellings}`;
    default:
      return `letter case as the framework routes (Express: any case unless "case sensitive routing"; Fastify, Hono: exact), any case where none is known (serve, rls, Lambda@Edge, Workers, withRateLimit); ${spellings}`;
  }
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
