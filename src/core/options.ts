/**
 * The run-time check of a public function's options, for callers in plain JavaScript, whom the
 * types do not reach: without it `createLimiter({ polcy })` fails deep inside with a TypeError
 * about `identity`, and `nodeRateLimit({ limiter, skipp })` silently skips nothing. Every
 * function checks its options here, so that each says the same things the same way, as the
 * policy's errors do: an unknown option named with the closest known one, a required option
 * missing, a value of the wrong kind. Ranges (a `maxKeys` of 1) stay with the code that knows
 * why they matter.
 *
 * A function's options are described once, as data (`OptionsShape<T>`), and TypeScript holds
 * that description to the options' interface: a key added to one and not to the other does
 * not compile.
 *
 * Every check is written `if (typeof EDGELIMIT_BUNDLE === "undefined") checkOptions(name,
 * options, shapeOfThem())`, with the shape built by a function: in the bundles `edgelimit
 * build` writes, whose options it wrote itself, the condition is false when esbuild reads it, so
 * the check, the shape and this module drop out of what a Lambda@Edge cold start loads (see
 * core/bundle.d.ts). A shape at module level would stay: esbuild keeps an object built with a
 * spread or a call.
 */
import { EdgelimitError, type ErrorCode, type PolicyIssue } from "./errors.js";

/** A kind of value an option takes, as messages name it. */
export interface OptionKind {
  /** `a function`, `a store (memoryStore(), redisStore({ client }), ...)`. */
  readonly describe: string;
  readonly test: (value: unknown) => boolean;
  /** The fields of an object option, checked in turn (`blockCache: { maxKeys }`). */
  readonly fields?: Shape;
}

/** What an option takes: a primitive kind by name, the value `false`, or a kind of its own. */
export type Accepted =
  | "string"
  | "number"
  | "boolean"
  | "function"
  | "object"
  | "array"
  | false
  | OptionKind;
export type Accepts = Accepted | readonly Accepted[];

/** An option the function cannot work without. */
export interface RequiredOption {
  readonly required: Accepts;
}

/**
 * Every key of `T`, with what it accepts: `required(...)` exactly where `T` requires the key,
 * so that the check and the type say the same.
 */
export type OptionsShape<T> = {
  readonly [K in keyof T]-?: Partial<Pick<T, K>> extends Pick<T, K> ? Accepts : RequiredOption;
};

type Shape = Readonly<Record<string, Accepts | RequiredOption>>;

export function required(accepts: Accepts): RequiredOption {
  return { required: accepts };
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** An object option whose own fields are checked (`breaker: { failureThreshold }`). */
export function fields(shape: Shape, describe = "an object"): OptionKind {
  return { describe, test: isObject, fields: shape };
}

/** One of a few values (`clock: "server" | "caller"`). */
export function oneOf(...values: readonly (string | number)[]): OptionKind {
  return {
    describe: values.map((value) => JSON.stringify(value)).join(" or "),
    test: (value) => values.includes(value as string | number),
  };
}

/** A store: what `createLimiter` counts in. */
export const STORE: OptionKind = {
  describe: "a store (memoryStore(), redisStore({ client }), dynamodbStore({ region }), ...)",
  test: (value) => isObject(value) && typeof value.apply === "function",
};

/** A policy the limiter can run: resolved, not the input `definePolicy` takes. */
export const POLICY: OptionKind = {
  describe: "a policy from definePolicy(input), loadPolicy(file) or parsePolicy(text)",
  test: (value) => isObject(value) && Array.isArray(value.rules) && isObject(value.identity),
};

const NAMED: Readonly<Record<string, OptionKind>> = {
  string: { describe: "a string", test: (value) => typeof value === "string" },
  number: { describe: "a number", test: (value) => typeof value === "number" },
  boolean: { describe: "true or false", test: (value) => typeof value === "boolean" },
  function: { describe: "a function", test: (value) => typeof value === "function" },
  object: { describe: "an object", test: isObject },
  array: { describe: "an array", test: Array.isArray },
};
const FALSE: OptionKind = { describe: "false", test: (value) => value === false };

export interface CheckSettings {
  /** Default `EL_BAD_OPTION`; a store's options are `EL_STORE_OPTION`. */
  readonly code?: ErrorCode;
  /**
   * Options of other libraries a newcomer brings along (express-rate-limit's `windowMs`), with
   * what to write here instead.
   */
  readonly foreign?: Readonly<Record<string, string>>;
}

/**
 * Throws an `EdgelimitError` naming every problem with `options` (unknown keys, missing
 * required ones, values of the wrong kind); `name` is the function as the caller wrote it. A
 * known key whose value is `undefined` is absent, as in the types (an unknown key is a mistake
 * whatever its value). No options at all are fine when none is required.
 */
export function checkOptions(
  name: string,
  options: unknown,
  shape: Shape,
  settings: CheckSettings = {},
): void {
  const code = settings.code ?? "EL_BAD_OPTION";
  if (options === undefined && !Object.values(shape).some(isRequired)) return;
  if (!isObject(options)) {
    const needed = Object.keys(shape).filter((key) => isRequired(shape[key]));
    const what = needed.length === 0 ? "" : ` with ${needed.map((key) => `\`${key}\``).join(", ")}`;
    throw new EdgelimitError(
      code,
      `${name}: options must be an object${what}; got ${received(options)}`,
      [{ path: "", message: `must be an object${what}`, code }],
    );
  }
  const problems: string[][] = [];
  collect(options, shape, "", settings.foreign ?? {}, problems);
  if (problems.length === 0) return;
  const issues: PolicyIssue[] = problems.map(([path = "", message = ""]) => ({
    path,
    message,
    code,
  }));
  const message =
    issues.length === 1
      ? `${name}: ${issues[0]?.message}`
      : `${name}: ${issues.length} problems with its options\n${issues.map((issue) => `  ${issue.message}`).join("\n")}`;
  throw new EdgelimitError(code, message, issues);
}

/** Throws when a positional argument (`withRateLimit`'s handler) is not what it must be. */
export function checkArgument(
  name: string,
  label: string,
  value: unknown,
  accepts: Accepts,
  code: ErrorCode = "EL_BAD_OPTION",
): void {
  if (kindsOf(accepts).some((kind) => kind.test(value))) return;
  const message = `${label} must be ${describe(accepts)}; got ${received(value)}`;
  throw new EdgelimitError(code, `${name}: ${message}`, [{ path: label, message, code }]);
}

function collect(
  options: Record<string, unknown>,
  shape: Shape,
  prefix: string,
  foreign: Readonly<Record<string, string>>,
  problems: string[][],
): void {
  const known = Object.keys(shape);
  for (const key of Object.keys(options)) {
    if (Object.hasOwn(shape, key)) continue;
    const path = `${prefix}${key}`;
    const elsewhere = prefix === "" ? foreign[key] : undefined;
    const closest = closestKey(key, known);
    problems.push([
      path,
      elsewhere !== undefined
        ? `unknown option \`${path}\`: ${elsewhere}`
        : closest !== undefined
          ? `unknown option \`${path}\`: did you mean \`${prefix}${closest}\`?`
          : `unknown option \`${path}\`; the options are ${known.map((name) => `\`${name}\``).join(", ")}`,
    ]);
  }
  for (const key of known) {
    const rule = shape[key] as Accepts | RequiredOption;
    const accepts = isRequired(rule) ? rule.required : (rule as Accepts);
    const path = `${prefix}${key}`;
    const value = options[key];
    if (value === undefined) {
      if (isRequired(rule)) problems.push([path, `\`${path}\` is required: ${describe(accepts)}`]);
      continue;
    }
    const kind = kindsOf(accepts).find((candidate) => candidate.test(value));
    if (kind === undefined) {
      problems.push([path, `\`${path}\` must be ${describe(accepts)}; got ${received(value)}`]);
    } else if (kind.fields !== undefined) {
      collect(value as Record<string, unknown>, kind.fields, `${path}.`, foreign, problems);
    }
  }
}

function isRequired(rule: Accepts | RequiredOption | undefined): rule is RequiredOption {
  return typeof rule === "object" && rule !== null && "required" in rule;
}

function kindsOf(accepts: Accepts): OptionKind[] {
  const list: readonly Accepted[] = Array.isArray(accepts) ? accepts : [accepts as Accepted];
  return list.map((accepted) =>
    accepted === false
      ? FALSE
      : typeof accepted === "string"
        ? (NAMED[accepted] as OptionKind)
        : accepted,
  );
}

function describe(accepts: Accepts): string {
  return kindsOf(accepts)
    .map((kind) => kind.describe)
    .join(" or ");
}

/**
 * What was passed, without echoing a string: a token or a key passed in the wrong place must
 * not reach a log through the message that says so.
 */
function received(value: unknown): string {
  if (value === null || value === undefined) return String(value);
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  if (typeof value === "string") return "a string";
  if (typeof value === "function") return "a function";
  if (Array.isArray(value)) return "an array";
  return typeof value === "object" ? "an object" : `a ${typeof value}`;
}

/** The known key a misspelt one most likely meant, if any is close enough to suggest. */
function closestKey(key: string, known: readonly string[]): string | undefined {
  const lower = key.toLowerCase();
  const limit = Math.max(1, Math.floor((key.length + 1) / 3));
  let best: string | undefined;
  let bestDistance = limit + 1;
  for (const candidate of known) {
    const distance = editDistance(lower, candidate.toLowerCase());
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}

/** Edits (insert, delete, replace, swap two neighbours) that turn `a` into `b`. */
function editDistance(a: string, b: string): number {
  const rows: number[][] = [];
  for (let i = 0; i <= a.length; i++) {
    const row: number[] = [i];
    for (let j = 1; j <= b.length; j++) {
      if (i === 0) {
        row.push(j);
        continue;
      }
      const above = rows[i - 1] as number[];
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let distance = Math.min(
        (above[j] as number) + 1,
        (row[j - 1] as number) + 1,
        (above[j - 1] as number) + cost,
      );
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        distance = Math.min(distance, ((rows[i - 2] as number[])[j - 2] as number) + 1);
      }
      row.push(distance);
    }
    rows.push(row);
  }
  return (rows[a.length] as number[])[b.length] as number;
}

/**
 * `ms`, the duration option `name` of `owner`, refused with `code` unless it is a positive,
 * finite number of milliseconds.
 */
export function positiveMs(
  ms: number,
  owner: string,
  name: string,
  code: ErrorCode = "EL_STORE_OPTION",
): number {
  if (!Number.isFinite(ms) || ms <= 0) {
    throw new EdgelimitError(
      code,
      `${owner}: ${name} must be a positive number of milliseconds; got ${ms}`,
    );
  }
  return ms;
}
