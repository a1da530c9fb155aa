import { type Document, isMap, isSeq, LineCounter, parseDocument } from "yaml";
import type { ZodType } from "zod";
import { EdgelimitError, type ErrorCode, type PolicyIssue } from "../core/errors.js";
import { checkArgument } from "../core/options.js";
import { policyWarnings } from "./lint.js";
import { showControl } from "./path-key.js";
import type { RawIssue } from "./raw-issue.js";
import { resolvePolicy } from "./resolve.js";
import { type PolicyInput, policySchema } from "./schema.js";
import type { ResolvedPolicy } from "./types.js";
import { repeatedKeys } from "./yaml-keys.js";

/**
 * Validates a policy written in TypeScript (or parsed by the caller) and resolves it into the
 * rules the limiter runs. Throws an `EdgelimitError` whose `issues` name every bad field.
 */
export function definePolicy(input: PolicyInput): ResolvedPolicy {
  return validate(input, undefined, "policy");
}

/**
 * Reads a YAML or JSON policy file (Node, Deno, Bun). Errors carry the field path and the line.
 * `node:fs` is looked up when called, never imported, so that this module (and `edgelimit`)
 * bundles for edge runtimes, where `definePolicy` or `parsePolicy` take the policy instead.
 */
export function loadPolicy(file: string): ResolvedPolicy {
  if (typeof EDGELIMIT_BUNDLE === "undefined")
    checkArgument("loadPolicy", "the file's path", file, "string");
  const fs = nodeFs();
  if (fs === undefined) {
    throw new EdgelimitError(
      "EL_POLICY_FILE",
      `cannot read policy file ${file}: this runtime has no file system; pass the policy to definePolicy() or its text to parsePolicy() instead`,
    );
  }
  let text: string;
  try {
    text = fs.readFileSync(file, "utf8");
  } catch (error) {
    throw new EdgelimitError(
      "EL_POLICY_FILE",
      `cannot read policy file ${file}: ${(error as Error).message}`,
    );
  }
  return parsePolicy(text, file);
}

function nodeFs(): typeof import("node:fs") | undefined {
  const process = (globalThis as { process?: { getBuiltinModule?: (id: string) => unknown } })
    .process;
  return process?.getBuiltinModule?.("node:fs") as typeof import("node:fs") | undefined;
}

/** Parses policy text (YAML, of which JSON is a subset). `source` names it in messages. */
export function parsePolicy(text: string, source = "policy"): ResolvedPolicy {
  if (typeof EDGELIMIT_BUNDLE === "undefined") {
    checkArgument("parsePolicy", "the policy's text", text, "string");
    checkArgument("parsePolicy", "the source's name (second argument)", source, "string");
  }
  const lineCounter = new LineCounter();
  // Repeated keys are found by repeatedKeys, which names the field; the parser would not.
  const document = parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: false });
  if (document.errors.length > 0) {
    const issues: PolicyIssue[] = document.errors.map((error) => {
      const { line, col } = lineCounter.linePos(error.pos[0]);
      return {
        path: "",
        message: (error.message.split("\n")[0] ?? error.message).replace(
          / at line \d+, column \d+:?$/,
          "",
        ),
        line,
        column: col,
        code: "EL_POLICY_PARSE",
      };
    });
    throw policyError(source, issues);
  }
  const repeated = repeatedKeys(document.contents, lineCounter);
  if (repeated.length > 0) {
    throw policyError(
      source,
      repeated.map((repetition) => ({
        path: repetition.path.join("."),
        message: `written twice in one mapping (first on line ${repetition.firstLine}); keep one`,
        line: repetition.line,
        code: "EL_POLICY_PARSE",
      })),
    );
  }
  const input = document.toJS();
  return validate(input, { document, lineCounter }, source);
}

/**
 * The warnings of a valid policy's text (see lint.ts), each with its line: traffic that no rule
 * counts, overlapping prefixes. Throws as `parsePolicy` does when the policy is not valid.
 */
export function policyWarningsOf(text: string, source = "policy"): PolicyIssue[] {
  const policy = parsePolicy(text, source);
  const lineCounter = new LineCounter();
  const document = parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: true });
  return policyWarnings(policy).map((issue) => locate(issue, { document, lineCounter }));
}

interface Located {
  readonly document: Document;
  readonly lineCounter: LineCounter;
}

function validate(input: unknown, located: Located | undefined, source: string): ResolvedPolicy {
  if (input === null || typeof input !== "object" || Array.isArray(input)) {
    throw policyError(source, [
      {
        path: "",
        message: "a policy is a mapping of fields (version, identity, tiers, ...)",
        code: "EL_POLICY_INVALID",
      },
    ]);
  }
  const parsed = policySchema.safeParse(input);
  if (!parsed.success) {
    const issues = parsed.error.issues.flatMap((issue) => fromZodIssue(issue));
    throw policyError(
      source,
      issues.map((issue) => locate(issue, located)),
    );
  }
  const { policy, issues } = resolvePolicy(parsed.data);
  if (policy === undefined || issues.length > 0) {
    throw policyError(
      source,
      issues.map((issue) => locate(issue, located)),
    );
  }
  return policy;
}

function policyError(source: string, issues: PolicyIssue[]): EdgelimitError {
  const lines = issues.map((issue) => `  ${formatIssue(issue)}`);
  const first = issues[0];
  return new EdgelimitError(
    first?.code ?? "EL_POLICY_INVALID",
    `${source}: ${issues.length} problem${issues.length === 1 ? "" : "s"}\n${lines.join("\n")}`,
    issues,
  );
}

/** `line 12: tiers.anonymous.paths./api/reports: must be ...` (`FILE, line 12: ...` with a file). */
export function formatIssue(issue: PolicyIssue): string {
  const column = issue.column === undefined ? "" : `, column ${issue.column}`;
  const line = issue.line === undefined ? "" : `line ${issue.line}${column}`;
  const place = [issue.file ?? "", line].filter((part) => part !== "").join(", ");
  const where = place === "" ? "" : `${place}: `;
  const field = issue.path === "" ? "" : `${escapeControls(issue.path)}: `;
  return `${where}${field}${issue.message}`;
}

/** A field's path as one line: a key with a line break in it (refused) shown escaped. */
function escapeControls(text: string): string {
  return text.replace(/\p{Cc}/gu, showControl);
}

type ZodIssueLike = {
  code: string;
  path: PropertyKey[];
  message: string;
  keys?: string[];
  errors?: ZodIssueLike[][];
  expected?: unknown;
  values?: unknown[];
  input?: unknown;
  /** An invalid record key's own issues (a path key that can never match). */
  issues?: { message: string }[];
};

function fromZodIssue(issue: ZodIssueLike): RawIssue[] {
  const path = issue.path.map((part) => (typeof part === "number" ? part : String(part)));
  if (issue.code === "unrecognized_keys") {
    return (issue.keys ?? []).map((key) => {
      const allowed = allowedKeys(path);
      if (path.length === 1 && path[0] === "tiers") {
        return {
          path: [...path, key],
          code: "EL_POLICY_UNKNOWN_TIER" as ErrorCode,
          message: `unknown tier "${key}"; the tiers are anonymous and authenticated (plans such as pro go under tiers.authenticated.plans)`,
        };
      }
      return {
        path: [...path, key],
        code: "EL_POLICY_UNKNOWN_FIELD" as ErrorCode,
        message: `unknown field "${key}"${allowed.length > 0 ? `; allowed here: ${allowed.join(", ")}` : ""}`,
      };
    });
  }
  let message = issue.message;
  if (issue.code === "invalid_type") {
    message = issue.message.startsWith("Invalid input")
      ? `must be ${String(issue.expected)}${describeReceived(issue.input)}`
      : issue.message;
  } else if (issue.code === "invalid_value" && issue.values !== undefined) {
    message = `must be one of ${issue.values.map((value) => JSON.stringify(value)).join(", ")}`;
  } else if (issue.code === "invalid_key" && issue.issues !== undefined) {
    message = issue.issues.map((keyIssue) => keyIssue.message).join("; ");
  }
  const code: ErrorCode = path.includes("window") ? "EL_POLICY_BAD_WINDOW" : "EL_POLICY_INVALID";
  return [{ path, code, message }];
}

function describeReceived(input: unknown): string {
  if (input === undefined) return " (missing)";
  return `; got ${JSON.stringify(input)}`;
}

/** The fields the schema allows at a path, for "unknown field" messages. */
function allowedKeys(path: readonly (string | number)[]): string[] {
  let schema: ZodType | undefined = policySchema;
  for (const part of path) {
    schema = unwrap(schema);
    const def = (schema as unknown as { _zod: { def: Record<string, unknown> } })._zod.def;
    if (def.type === "object") schema = (def.shape as Record<string, ZodType>)[String(part)];
    else if (def.type === "record") schema = def.valueType as ZodType;
    else if (def.type === "array") schema = def.element as ZodType;
    else return [];
    if (schema === undefined) return [];
  }
  schema = unwrap(schema);
  const def = (schema as unknown as { _zod: { def: Record<string, unknown> } })._zod.def;
  return def.type === "object" ? Object.keys(def.shape as object) : [];
}

function unwrap(schema: ZodType | undefined): ZodType | undefined {
  let current = schema;
  for (let depth = 0; depth < 10 && current !== undefined; depth++) {
    const def = (current as unknown as { _zod: { def: Record<string, unknown> } })._zod.def;
    if (def.type === "optional" || def.type === "default" || def.type === "nullable") {
      current = def.innerType as ZodType;
    } else if (def.type === "pipe") {
      current = def.out as ZodType;
    } else {
      return current;
    }
  }
  return current;
}

/** Adds the YAML line of the field (or of the nearest ancestor that exists). */
function locate(issue: RawIssue, located: Located | undefined): PolicyIssue {
  const path = issue.path.join(".");
  if (located === undefined) return { path, message: issue.message, code: issue.code };
  const { document, lineCounter } = located;
  for (let length = issue.path.length; length >= 0; length--) {
    const offset = offsetOf(document, issue.path.slice(0, length));
    if (offset !== undefined) {
      return {
        path,
        message: issue.message,
        code: issue.code,
        line: lineCounter.linePos(offset).line,
      };
    }
  }
  return { path, message: issue.message, code: issue.code };
}

function offsetOf(document: Document, path: readonly (string | number)[]): number | undefined {
  // biome-ignore lint/suspicious/noExplicitAny: walking the YAML node tree.
  let node: any = document.contents;
  let keyOffset: number | undefined = node?.range?.[0];
  for (const part of path) {
    if (isMap(node)) {
      const pair = node.items.find(
        (item: { key: unknown }) =>
          String((item.key as { value?: unknown } | null)?.value ?? item.key) === String(part),
      ) as { key?: { range?: number[] }; value: unknown } | undefined;
      if (pair === undefined) return undefined;
      keyOffset = pair.key?.range?.[0];
      node = pair.value;
    } else if (isSeq(node)) {
      node = node.items[Number(part)];
      keyOffset = node?.range?.[0];
    } else {
      return undefined;
    }
  }
  return keyOffset;
}
