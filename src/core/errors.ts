/** Every error edgelimit raises carries a stable code, so that callers can branch on it. */
export type ErrorCode =
  | "EL_POLICY_PARSE"
  | "EL_POLICY_UNKNOWN_FIELD"
  | "EL_POLICY_INVALID"
  | "EL_POLICY_UNKNOWN_TIER"
  | "EL_POLICY_BAD_WINDOW"
  | "EL_POLICY_FILE"
  | "EL_POLICY_SECRET_MISSING"
  /** A warning: some traffic is counted by no rule (unlimited), or two rules overlap. */
  | "EL_POLICY_UNLIMITED"
  | "EL_POLICY_OVERLAP"
  | "EL_BAD_ARGUMENT"
  /** A request's cost that is not a whole number from 1 to `MAX_COST`. */
  | "EL_BAD_COST"
  /** An application user (the middleware's `user` option) whose id or plan is not a string. */
  | "EL_BAD_USER"
  /** A policy with `counting: hybrid` rules on a remote store without `hybridCounting()`. */
  | "EL_HYBRID_STORE"
  | "EL_LIST_SOURCE"
  /** An envoyproxy/ratelimit configuration (`edgelimit rls --config`) that cannot be loaded. */
  | "EL_RLS_CONFIG"
  | "EL_STORE_TIMEOUT"
  | "EL_STORE_FAILED";

export interface PolicyIssue {
  /** The file the issue is in, where a configuration spans several (`edgelimit rls --config DIR`). */
  readonly file?: string;
  /** Dotted path of the field (`tiers.anonymous.paths./api/reports.limit`). */
  readonly path: string;
  readonly message: string;
  /** 1-based line in the source file, when known. */
  readonly line?: number;
  /** 1-based column, for YAML syntax errors (where there is no field path to name). */
  readonly column?: number;
  readonly code: ErrorCode;
}

export class EdgelimitError extends Error {
  readonly code: ErrorCode;
  readonly issues: readonly PolicyIssue[];

  constructor(code: ErrorCode, message: string, issues: readonly PolicyIssue[] = []) {
    super(message);
    this.name = "EdgelimitError";
    this.code = code;
    this.issues = issues;
  }
}
