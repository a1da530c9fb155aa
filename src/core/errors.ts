/**
 * Every error edgelimit raises carries a stable code, so that callers can branch on it, and
 * each code has a section of its own in docs/errors.md (`EdgelimitError.docs`).
 */
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
  /** A request's cost that is not a whole number from 1 to `MAX_COST`. */
  | "EL_BAD_COST"
  /** An application user (the middleware's `user` option) whose id or plan is not a string. */
  | "EL_BAD_USER"
  /** An option of a middleware, an adapter or `createRateLimit` that cannot work as given. */
  | "EL_BAD_OPTION"
  /** A duration or window written in code that is not one (`"60s"`, `"1mo"`). */
  | "EL_BAD_DURATION"
  /** An address or range written in code or a list that is not one. */
  | "EL_BAD_ADDRESS"
  /** A command-line flag (or, for `rls`, an environment variable) out of range. */
  | "EL_CLI_ARGUMENT"
  /** An optional package a command or entry point needs is not installed. */
  | "EL_MISSING_PACKAGE"
  /** A store's option out of range or missing. */
  | "EL_STORE_OPTION"
  /** A store's URL (`--store`, a client's endpoint) that does not name a store. */
  | "EL_STORE_URL"
  /** A Workers binding the Cloudflare store needs is not in `env`. */
  | "EL_STORE_BINDING"
  /** `limiter.reset` on a store that cannot forget counters. */
  | "EL_NO_RESET"
  /** A policy with `counting: hybrid` rules on a remote store without `hybridCounting()`. */
  | "EL_HYBRID_STORE"
  | "EL_LIST_SOURCE"
  /** An envoyproxy/ratelimit configuration (`edgelimit rls --config`) that cannot be loaded. */
  | "EL_RLS_CONFIG"
  /** A call to `edgelimit rls` that cannot be decided (malformed, no domain, no descriptor). */
  | "EL_RLS_REQUEST"
  /** An override whose subject is not `user:`, `key:` or `ip:` with an address or range. */
  | "EL_OVERRIDE_SUBJECT"
  /** An override for a rule or plan the policy has not, or one `overrides.rules` leaves out. */
  | "EL_OVERRIDE_RULE"
  /** An override's limit that is not a whole number, or above the policy's `overrides.maxLimit`. */
  | "EL_OVERRIDE_LIMIT"
  /** An override's expiry that is not a time, or not in the future. */
  | "EL_OVERRIDE_EXPIRY"
  /** An override with no effect or several, or a note or reason that is too long. */
  | "EL_OVERRIDE_INVALID"
  /** A store that holds `MAX_OVERRIDES` overrides already, none of them expired. */
  | "EL_OVERRIDE_FULL"
  /** Overrides on a store that keeps none. */
  | "EL_OVERRIDE_STORE"
  /** An overrides file (`replay` or `simulate --overrides`) that cannot be read as a list of them. */
  | "EL_OVERRIDE_FILE"
  /** A Worker's override route that refused the call: no token, a wrong one, or no secret set. */
  | "EL_OVERRIDE_ADMIN"
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

  /** Where the code is explained, in the package's docs: `docs/errors.md#el_store_url`. */
  get docs(): string {
    return `docs/errors.md#${this.code.toLowerCase()}`;
  }
}
