/**
 * The secrets a policy reads (`{ env: NAME }`, `{ file: PATH }`), and one check that every
 * secret a running policy needs is there, made before any is used: a policy that reads two
 * unset variables is refused once, naming both, rather than once per start for each.
 */
import { EdgelimitError, type PolicyIssue } from "../core/errors.js";
import type { ResolvedPolicy, SecretSource } from "./types.js";

export interface PolicySecret {
  /** The policy field that reads it, as errors name fields: `challenge.secret`. */
  readonly path: string;
  readonly source: SecretSource;
}

/** Every secret the policy names, whether or not it will read it. */
export function namedSecrets(policy: ResolvedPolicy): PolicySecret[] {
  const { jwt } = policy.identity;
  const { challenge } = policy;
  const candidates: [string, SecretSource | undefined][] = [
    ["identity.user.jwt.secret", jwt?.secret],
    ["identity.user.jwt.publicKey", jwt?.publicKey],
    ["challenge.secret", challenge.secret],
    ["challenge.previousSecret", challenge.previousSecret],
    [
      "challenge.provider.secret",
      challenge.provider.kind === "pow" ? undefined : challenge.provider.secret,
    ],
  ];
  const secrets: PolicySecret[] = [];
  for (const [path, source] of candidates) {
    if (source !== undefined) secrets.push({ path, source });
  }
  return secrets;
}

/**
 * The secrets a running policy reads: the JWT key of its algorithms, and the challenge's keys
 * only when an enforcing rule challenges (a policy that never challenges never reads them).
 */
export function neededSecrets(policy: ResolvedPolicy): PolicySecret[] {
  const jwt = policy.identity.jwt;
  const symmetric = jwt?.algorithms.every((algorithm) => algorithm.startsWith("HS")) ?? false;
  const challenging = policy.rules.some((rule) => rule.action === "challenge" && !rule.shadow);
  return namedSecrets(policy).filter(({ path }) => {
    if (path === "identity.user.jwt.secret") return symmetric;
    if (path === "identity.user.jwt.publicKey") return jwt !== undefined && !symmetric;
    // The previous key is read beside a configured key only (without one, a random key).
    if (path === "challenge.previousSecret")
      return challenging && policy.challenge.secret !== undefined;
    return challenging;
  });
}

/**
 * Throws `EL_POLICY_SECRET_MISSING` naming every secret the running policy needs that is not
 * there: an unset (or empty) variable, a file that cannot be read. One issue each.
 */
export function requireSecrets(
  policy: ResolvedPolicy,
  context: {
    readonly env: Readonly<Record<string, string | undefined>>;
    readonly readFile?: ((path: string) => string) | undefined;
  },
): void {
  const issues: PolicyIssue[] = [];
  const unset: string[] = [];
  for (const { path, source } of neededSecrets(policy)) {
    if ("env" in source) {
      const value = context.env[source.env];
      if (value !== undefined && value !== "") continue;
      unset.push(source.env);
      issues.push({
        path,
        code: "EL_POLICY_SECRET_MISSING",
        message: `environment variable ${source.env} is not set; set it to the secret (for example export ${source.env}=...)`,
      });
    } else if ("file" in source) {
      const problem = unreadable(source.file, context.readFile);
      if (problem !== undefined) {
        issues.push({ path, code: "EL_POLICY_SECRET_MISSING", message: problem });
      }
    }
  }
  if (issues.length === 0) return;
  const named = issues.map((issue) => issue.path).join(", ");
  const exports =
    unset.length === 0
      ? ""
      : `; for example export ${unset.map((name) => `${name}=...`).join(" ")}`;
  throw new EdgelimitError(
    "EL_POLICY_SECRET_MISSING",
    `${issues.length === 1 ? "a secret the policy reads is" : `${issues.length} secrets the policy reads are`} missing (${named})${exports}\n${issues.map((issue) => `${issue.path}: ${issue.message}`).join("\n")}`,
    issues,
  );
}

function unreadable(
  file: string,
  readFile: ((path: string) => string) | undefined,
): string | undefined {
  if (readFile === undefined) {
    return "secrets from files are not available in this runtime; use { env: NAME } or { value: ... }";
  }
  try {
    readFile(file);
    return undefined;
  } catch (error) {
    return `cannot read the file ${file}: ${(error as Error).message}`;
  }
}
