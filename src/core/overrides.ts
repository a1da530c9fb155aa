/**
 * Overrides: an operator's word on one subject, beside the policy. The policy is right for a
 * plan; it is wrong for the customer whose contract says 5,000 a minute, the partner migrating
 * this weekend, or the key that leaked an hour ago. An override names a subject (`user:u_abc`,
 * `key:…`, `ip:203.0.113.7`, or an address range `ip:203.0.113.0/24`), a scope (one rule, the
 * rules of a plan, or all rules) and one effect: another `limit` (the rule's window and counter
 * stay, so the count carries over), `block` (always refuse) or `allow` (never count or limit);
 * optionally until when, and a note saying who and why.
 *
 * This file is the model, the check of what an operator writes (`checkOverride`: every mistake
 * is an `EdgelimitError` before anything is stored) and the contract of where overrides live
 * (`OverrideSource`). How they reach a request: override-watch.ts; how they change a call:
 * override-table.ts.
 */
import { EdgelimitError } from "./errors.js";
import { parseCidr } from "./ip.js";
import { escapeKeyPart, subjectKey } from "./keys.js";

/**
 * What checking an override reads of the policy: its rules, plans and `overrides` bounds (a
 * `ResolvedPolicy`, core/model.ts, is one; named here so that this contract needs no model).
 */
export interface OverridePolicy {
  readonly rules: readonly {
    readonly id: string;
    readonly plans?: readonly string[] | undefined;
  }[];
  readonly plans: { readonly names: readonly string[] };
  readonly overrides?:
    | { readonly maxLimit: number | undefined; readonly rules: readonly string[] | undefined }
    | undefined;
}

/** One stored override, as every instance reads it. */
export interface Override {
  /** The subject as counters name it (`user:u_abc`, `ip:203.0.113.7`), or an address range (`ip:203.0.113.0/24`). */
  readonly subject: string;
  /** `all`, `rule:<id>` or `plan:<name>`. */
  readonly scope: string;
  readonly effect: "limit" | "block" | "allow";
  /** The limit, for `effect: "limit"`. */
  readonly limit?: number;
  /** Why, for `effect: "block"` (kept for the operator; never sent to the client). */
  readonly reason?: string;
  /** Epoch milliseconds after which the override no longer applies. */
  readonly until?: number;
  /** Who set it and why. */
  readonly note?: string;
  /** Epoch milliseconds when it was set. */
  readonly setAt: number;
}

/** What `limiter.overrides.set` and `edgelimit override set` take. */
export interface OverrideInput {
  readonly subject: string;
  /** One rule's id; with neither `rule` nor `plan`, the override applies to all rules. */
  readonly rule?: string | undefined;
  /** The rules of one plan. */
  readonly plan?: string | undefined;
  /** Exactly one of `limit`, `block` and `allow`. `block` may be a reason. */
  readonly limit?: number | undefined;
  readonly block?: boolean | string | undefined;
  readonly allow?: boolean | undefined;
  /** Epoch milliseconds, an ISO 8601 time or a Date; in the future. */
  readonly until?: number | string | Date | undefined;
  readonly note?: string | undefined;
}

/** Which override to remove: a subject and a scope, as it was set. */
export type OverrideTarget = Pick<OverrideInput, "subject" | "rule" | "plan">;

/** One line of the change log every store keeps (bounded: the newest `OVERRIDE_LOG_SIZE`). */
export interface OverrideChange {
  /** Epoch milliseconds. */
  readonly at: number;
  readonly action: "set" | "remove";
  readonly subject: string;
  readonly scope: string;
  /** What was set (`action: "set"`). */
  readonly override?: Override;
  readonly note?: string;
}

/**
 * Where overrides live: beside the counters, in the store (`Store.overrides`). A limiter never
 * reads it on a request's path: it reads `version` in the background and `list` when that
 * changed (override-watch.ts).
 */
export interface OverrideSource {
  readonly name: string;
  /** Changes whenever the stored overrides change; one small read. */
  version(): Promise<string>;
  /** Every stored override (expired ones included until a `put` prunes them). */
  list(): Promise<readonly Override[]>;
  /**
   * Stores `override` (replacing the one with its subject and scope) and logs the change.
   * Refuses with `EL_OVERRIDE_FULL` when `max` others are stored and none has expired by `now`.
   */
  put(override: Override, now: number, max: number): Promise<void>;
  /** Removes the override of this subject and scope; resolves whether there was one. */
  delete(subject: string, scope: string, change: OverrideChange): Promise<boolean>;
  /** The newest `count` changes, oldest first. */
  changes(count: number): Promise<readonly OverrideChange[]>;
}

/** Overrides one store holds at most (memory bounded on every instance that reads them). */
export const MAX_OVERRIDES = 10_000;
/** Changes the log keeps. */
export const OVERRIDE_LOG_SIZE = 1_000;
/** How often a limiter reads the store's overrides: the bound on how long a change takes to reach it. */
export const DEFAULT_OVERRIDE_REFRESH_MS = 5_000;
/**
 * Where requests refresh them (a Worker's isolate), longest a new instance's first requests wait
 * for its first read: a far Durable Object or database is one round trip of 100-300 ms away.
 */
export const DEFAULT_FIRST_READ_WAIT_MS = 500;

const SUBJECT = /^(ip|user|key):(.+)$/s;
const MAX_TEXT = 500;

/**
 * The override `input` asks for, checked against `policy`'s rules and its `overrides` bounds at
 * `now`. Throws an `EdgelimitError` (EL_OVERRIDE_SUBJECT, _RULE, _LIMIT, _EXPIRY, _INVALID) for
 * anything that could not apply as written.
 */
export function checkOverride(input: OverrideInput, policy: OverridePolicy, now: number): Override {
  const subject = canonicalSubject(input.subject);
  const scope = scopeOf(input, policy);
  const bounds = policy.overrides;
  if (bounds?.rules !== undefined && !scopeAllowed(scope, policy, bounds.rules)) {
    throw new EdgelimitError(
      "EL_OVERRIDE_RULE",
      `the policy lets overrides change only the rules ${bounds.rules.join(", ")} (overrides.rules); ${describeScope(scope)} is not among them`,
    );
  }
  const effects = [input.limit !== undefined, isSet(input.block), input.allow === true];
  if (effects.filter(Boolean).length !== 1) {
    throw new EdgelimitError(
      "EL_OVERRIDE_INVALID",
      "an override says exactly one of: limit (a number), block or allow",
    );
  }
  const until = expiryOf(input.until, now);
  const note = text(input.note, "note");
  const common = { subject, scope, setAt: now, ...(until === undefined ? {} : { until }) };
  const noted = note === undefined ? common : { ...common, note };
  if (input.allow === true) return { ...noted, effect: "allow" };
  if (isSet(input.block)) {
    const reason = typeof input.block === "string" ? text(input.block, "block reason") : undefined;
    return { ...noted, effect: "block", ...(reason === undefined ? {} : { reason }) };
  }
  return { ...noted, effect: "limit", limit: limitOf(input.limit, bounds?.maxLimit) };
}

/**
 * A subject as counters name it: `user:` and `key:` values escaped as keys.ts escapes them, an
 * IPv4 address as is, and an IPv6 address or any range as a range (`ip:2001:db8::/64`).
 */
export function canonicalSubject(raw: unknown): string {
  const match = typeof raw === "string" ? SUBJECT.exec(raw.trim()) : null;
  if (match === null || (match[2] as string).length > MAX_TEXT) {
    throw new EdgelimitError(
      "EL_OVERRIDE_SUBJECT",
      `override subject ${JSON.stringify(raw)} is not one: write user:ID, key:KEY, ip:ADDRESS or ip:RANGE (such as user:u_abc or ip:203.0.113.0/24)`,
    );
  }
  const [, kind, value] = match as unknown as [string, "ip" | "user" | "key", string];
  if (kind !== "ip")
    return kind === "user" ? subjectKey("user", value) : `key:${escapeKeyPart(value)}`;
  let range: ReturnType<typeof parseCidr>;
  try {
    range = parseCidr(value);
  } catch {
    throw new EdgelimitError(
      "EL_OVERRIDE_SUBJECT",
      `override subject "${raw as string}": "${value}" is not an IP address or range; write ip:203.0.113.7 or ip:203.0.113.0/24`,
    );
  }
  const [address, bits] = range;
  if (address.kind() === "ipv4" && bits === 32) return `ip:${address.toString()}`;
  return `ip:${address.toString()}/${bits}`;
}

/** `rule:<id>`, `plan:<name>` or `all`, for an input's `rule` and `plan`. */
export function scopeOf(input: OverrideTarget, policy: OverridePolicy | undefined): string {
  if (input.rule !== undefined && input.plan !== undefined) {
    throw new EdgelimitError("EL_OVERRIDE_INVALID", "an override names a rule or a plan, not both");
  }
  if (input.rule !== undefined) {
    if (policy !== undefined && !policy.rules.some((rule) => rule.id === input.rule)) {
      throw new EdgelimitError(
        "EL_OVERRIDE_RULE",
        `the policy has no rule "${input.rule}"; its rules are ${policy.rules.map((rule) => rule.id).join(", ")}`,
      );
    }
    return `rule:${input.rule}`;
  }
  if (input.plan !== undefined) {
    if (policy !== undefined && !policy.plans.names.includes(input.plan)) {
      throw new EdgelimitError(
        "EL_OVERRIDE_RULE",
        `the policy has no plan "${input.plan}"; its plans are ${policy.plans.names.join(", ") || "none"}`,
      );
    }
    return `plan:${input.plan}`;
  }
  return "all";
}

/** Whether `rule` is in `scope`. */
export function inScope(
  scope: string,
  rule: { readonly id: string; readonly plans?: readonly string[] | undefined },
): boolean {
  if (scope === "all") return true;
  if (scope.startsWith("rule:")) return scope.slice(5) === rule.id;
  return rule.plans?.includes(scope.slice(5)) === true;
}

/** Whether every rule of `scope` is one the policy lets overrides change. */
function scopeAllowed(scope: string, policy: OverridePolicy, allowed: readonly string[]): boolean {
  const rules = policy.rules.filter((rule) => inScope(scope, rule));
  return rules.length > 0 && rules.every((rule) => allowed.includes(rule.id));
}

function describeScope(scope: string): string {
  return scope === "all" ? "all rules" : scope.replace(":", " ");
}

function limitOf(limit: number | undefined, maxLimit: number | undefined): number {
  if (typeof limit !== "number" || !Number.isSafeInteger(limit) || limit < 0) {
    throw new EdgelimitError(
      "EL_OVERRIDE_LIMIT",
      `override limit ${String(limit)} is not a whole number of 0 or more`,
    );
  }
  if (maxLimit !== undefined && limit > maxLimit) {
    throw new EdgelimitError(
      "EL_OVERRIDE_LIMIT",
      `override limit ${limit} is above the policy's bound (overrides.maxLimit: ${maxLimit}); raise the bound in the policy or ask for less`,
    );
  }
  return limit;
}

function expiryOf(until: OverrideInput["until"], now: number): number | undefined {
  if (until === undefined) return undefined;
  const at =
    until instanceof Date
      ? until.getTime()
      : typeof until === "number"
        ? until
        : /^\d+$/.test(until)
          ? Number(until)
          : Date.parse(until);
  if (!Number.isFinite(at)) {
    throw new EdgelimitError(
      "EL_OVERRIDE_EXPIRY",
      `override expiry ${JSON.stringify(until)} is not a time; write epoch milliseconds or an ISO 8601 time such as 2030-01-31T18:00:00Z`,
    );
  }
  if (at <= now) {
    throw new EdgelimitError(
      "EL_OVERRIDE_EXPIRY",
      `override expiry ${new Date(at).toISOString()} is not in the future (now ${new Date(now).toISOString()})`,
    );
  }
  return at;
}

function text(value: unknown, what: string): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "string" || value.length > MAX_TEXT) {
    throw new EdgelimitError(
      "EL_OVERRIDE_INVALID",
      `an override's ${what} is text of at most ${MAX_TEXT} characters`,
    );
  }
  return value;
}

function isSet(block: OverrideInput["block"]): boolean {
  return block === true || typeof block === "string";
}
