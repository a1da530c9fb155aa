/**
 * What envoyproxy/ratelimit checks of a file before it reads any value: every key, at every
 * depth, is a string from one list (that list is not per level: a known key in the wrong place
 * loads and is ignored, with a warning here); lists hold only maps; no leaf is a number its
 * reader types as a float or beyond int64 (config-scalars.ts); `metadata` holds anything. And a
 * key written twice in one mapping, which it would take silently (the last value wins).
 */
import {
  isMap,
  isScalar,
  isSeq,
  type LineCounter,
  type Node,
  type Pair,
  type Scalar,
  type YAMLMap,
} from "yaml";
import { repeatedKeys } from "../policy/yaml-keys.js";
import { refusedNumber } from "./config-scalars.js";

/** Every key envoyproxy/ratelimit accepts, wherever it appears (its check is not per level). */
const VALID_KEYS = new Set([
  "domain",
  "key",
  "value",
  "descriptors",
  "rate_limit",
  "unit",
  "requests_per_unit",
  "unlimited",
  "shadow_mode",
  "quota_mode",
  "name",
  "replaces",
  "detailed_metric",
  "value_to_metric",
  "share_threshold",
  "metadata",
]);

export const TOP_KEYS: ReadonlySet<string> = new Set(["domain", "descriptors"]);
export const DESCRIPTOR_KEYS: ReadonlySet<string> = new Set([
  "key",
  "value",
  "descriptors",
  "rate_limit",
  "shadow_mode",
  "quota_mode",
  "detailed_metric",
  "value_to_metric",
  "share_threshold",
  "metadata",
]);
export const RATE_LIMIT_KEYS: ReadonlySet<string> = new Set([
  "unit",
  "requests_per_unit",
  "unlimited",
  "name",
  "replaces",
]);
export const REPLACES_KEYS: ReadonlySet<string> = new Set(["name"]);

/** Where the checks report, with the reader's file and lines. */
export interface KeyReport {
  lineOf(node: Node | null | undefined): number;
  fail(line: number, path: string, message: string): void;
  warn(line: number, path: string, message: string): void;
}

/** Each key written twice in one mapping, anywhere in the file (metadata included). */
export function checkRepeatedKeys(root: Node | null, lines: LineCounter, report: KeyReport): void {
  for (const repetition of repeatedKeys(root, lines)) {
    const key = repetition.path[repetition.path.length - 1];
    report.fail(
      repetition.line,
      pathOf(repetition.path),
      `config error, key '${String(key)}' is written twice in one mapping (first on line ${repetition.firstLine}); envoyproxy/ratelimit would take the last value without a word: keep one`,
    );
  }
}

/**
 * The keys of `map` and below. Adds to `refused` the values refused as numbers, which the
 * readers of each field then skip (one problem is reported once).
 */
export function checkKeys(
  map: YAMLMap,
  path: string,
  report: KeyReport,
  refused: Set<Node> = new Set(),
): Set<Node> {
  for (const pair of map.items as Pair<Node | null, Node | null>[]) {
    const key = pair.key;
    const keyValue = isScalar(key) ? key.value : undefined;
    const line = report.lineOf(key);
    if (typeof keyValue !== "string") {
      report.fail(
        line,
        path,
        `config error, key is not of type string: ${isScalar(key) ? String(key.source ?? key.value) : "a map or list"}`,
      );
      continue;
    }
    const here = join(path, keyValue);
    if (!VALID_KEYS.has(keyValue)) {
      report.fail(line, here, `config error, unknown key '${keyValue}'`);
      continue;
    }
    if (keyValue === "metadata") continue;
    const value = pair.value;
    if (isScalar(value)) {
      if (refusedAsNumber(value, here, report)) refused.add(value);
    } else if (isMap(value)) checkKeys(value, here, report, refused);
    else if (isSeq(value)) {
      value.items.forEach((item, index) => {
        const itemPath = `${here}[${index}]`;
        if (isMap(item)) checkKeys(item, itemPath, report, refused);
        else {
          report.fail(
            report.lineOf(item as Node | null),
            itemPath,
            `config error, yaml file contains list of type other than map: ${describe(item as Node | null)}`,
          );
        }
      });
    }
  }
  return refused;
}

/**
 * A plain scalar that envoyproxy/ratelimit's reader types as a float or beyond int64 stops its
 * load wherever it stands (`value: 1.5` too, though a string is expected there).
 */
function refusedAsNumber(node: Scalar, path: string, report: KeyReport): boolean {
  if (node.type !== "PLAIN" || node.tag !== undefined) return false;
  const source = String(node.source);
  const refused = refusedNumber(source);
  if (refused === undefined) return false;
  const what =
    refused === "decimal"
      ? "a decimal number (YAML reads it as a float)"
      : "a number beyond 64-bit integers";
  report.fail(
    report.lineOf(node),
    path,
    `config error, ${source} is ${what}, which envoyproxy/ratelimit refuses anywhere in its configuration: quote it ('"${source}"') where text is meant`,
  );
  return true;
}

/** A key from the valid list in a place where envoyproxy/ratelimit ignores it. */
export function warnMisplaced(
  map: YAMLMap,
  path: string,
  allowed: ReadonlySet<string>,
  where: string,
  report: KeyReport,
): void {
  for (const pair of map.items as Pair<Node | null, Node | null>[]) {
    const key = isScalar(pair.key) ? pair.key.value : undefined;
    if (typeof key !== "string" || !VALID_KEYS.has(key) || allowed.has(key)) continue;
    report.warn(
      report.lineOf(pair.key),
      join(path, key),
      `'${key}' has no effect in ${where} (envoyproxy/ratelimit ignores it there too); ${hintFor(key)}`,
    );
  }
}

function hintFor(key: string): string {
  if (key === "domain") return "it belongs at the top of the file";
  if (RATE_LIMIT_KEYS.has(key)) return "put it under rate_limit";
  if (DESCRIPTOR_KEYS.has(key)) return "put it on the descriptor";
  return "remove it";
}

/** A node as a message shows it: a scalar as written, else what it is. */
export function describe(node: Node | null): string {
  if (node === null) return "nothing";
  if (isMap(node)) return "a map";
  if (isSeq(node)) return "a list";
  if (isScalar(node)) return String(node.source ?? node.value);
  return "a value";
}

/** `descriptors[0].rate_limit.unit` from the path's parts. */
function pathOf(parts: readonly (string | number)[]): string {
  let path = "";
  for (const part of parts) path = typeof part === "number" ? `${path}[${part}]` : join(path, part);
  return path;
}

export function join(path: string, key: string): string {
  return path === "" ? key : `${path}.${key}`;
}
