/**
 * One file of envoyproxy/ratelimit's configuration, read as that service reads it: YAML 1.1
 * (its parser's dialect: `yes` is true, `012` is 10), a closed set of keys checked at every
 * depth (an unknown or misspelt key is refused, so is a key that is not a string and a list
 * of anything but maps), scalar values taken as written where a string is expected, and the
 * first document only. Each problem is reported with its line; the checks that span files
 * (duplicate domains and descriptors, units, `replaces`) are in config.ts.
 */
import {
  isMap,
  isScalar,
  isSeq,
  LineCounter,
  type Node,
  type Pair,
  parseAllDocuments,
  type YAMLMap,
} from "yaml";
import type { PolicyIssue } from "../core/errors.js";

export interface YamlReplaces {
  readonly name: string;
  readonly line: number;
}

export interface YamlRateLimit {
  readonly requestsPerUnit: number;
  readonly unit: string;
  readonly unlimited: boolean;
  readonly name: string;
  readonly replaces: readonly YamlReplaces[];
  readonly line: number;
  readonly unitLine: number;
}

export interface YamlDescriptor {
  readonly key: string;
  readonly value: string;
  readonly rateLimit: YamlRateLimit | undefined;
  readonly descriptors: readonly YamlDescriptor[];
  readonly shadowMode: boolean;
  readonly quotaMode: boolean;
  readonly detailedMetric: boolean;
  readonly valueToMetric: boolean;
  readonly shareThreshold: boolean;
  /** The `metadata` map as plain data (undefined when absent). */
  readonly metadata: Readonly<Record<string, unknown>> | undefined;
  readonly metadataLine: number;
  readonly line: number;
}

export interface YamlFile {
  readonly name: string;
  readonly domain: string;
  readonly descriptors: readonly YamlDescriptor[];
  readonly line: number;
}

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

const TOP_KEYS = new Set(["domain", "descriptors"]);
const DESCRIPTOR_KEYS = new Set([
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
const RATE_LIMIT_KEYS = new Set(["unit", "requests_per_unit", "unlimited", "name", "replaces"]);
const REPLACES_KEYS = new Set(["name"]);

const MAX_UINT32 = 4_294_967_295;

/**
 * Parses one file. `issues` stop the file from loading; `warnings` are keys envoyproxy/ratelimit
 * accepts and then ignores where they stand (a `unit` directly under a descriptor, say), which
 * load here as there.
 */
export function parseConfigFile(
  name: string,
  text: string,
): { file: YamlFile | undefined; issues: PolicyIssue[]; warnings: PolicyIssue[] } {
  const reader = new FileReader(name, text);
  const file = reader.read();
  return { file: reader.issues.length === 0 ? file : undefined, ...reader.result() };
}

class FileReader {
  readonly #name: string;
  readonly #text: string;
  readonly #lines = new LineCounter();
  readonly issues: PolicyIssue[] = [];
  readonly #warnings: PolicyIssue[] = [];

  constructor(name: string, text: string) {
    this.#name = name;
    this.#text = text;
  }

  result(): { issues: PolicyIssue[]; warnings: PolicyIssue[] } {
    return { issues: this.issues, warnings: this.#warnings };
  }

  read(): YamlFile | undefined {
    const documents = parseAllDocuments(this.#text, {
      version: "1.1",
      lineCounter: this.#lines,
      prettyErrors: false,
      uniqueKeys: false,
    });
    const list = Array.isArray(documents) ? documents : [];
    const first = list[0];
    for (const error of first?.errors ?? []) {
      const { line, col } = this.#lines.linePos(error.pos[0]);
      const message = (error.message.split("\n")[0] ?? error.message).replace(
        / at line \d+, column \d+:?$/,
        "",
      );
      this.issues.push({
        file: this.#name,
        path: "",
        line,
        column: col,
        message: `error loading config file: ${message}`,
        code: "EL_RLS_CONFIG",
      });
    }
    if (this.issues.length > 0) return undefined;
    if (list.length > 1) {
      this.#warn(
        this.#lineOf(list[1]?.contents ?? null),
        "",
        "only the first YAML document of a file is read (as envoyproxy/ratelimit does); the others are ignored",
      );
    }
    const root = first?.contents ?? null;
    if (root === null || (isScalar(root) && root.value === null)) {
      this.#fail(1, "", "config file cannot have empty domain");
      return undefined;
    }
    if (!isMap(root)) {
      this.#fail(this.#lineOf(root), "", "the file must be a map with domain and descriptors");
      return undefined;
    }
    this.#checkKeys(root, "");
    this.#warnMisplaced(root, "", TOP_KEYS, "the top of the file");
    const domain = this.#string(root, "domain", "");
    const descriptors = this.#descriptors(root, "");
    return { name: this.#name, domain, descriptors, line: this.#lineOf(root) };
  }

  /**
   * envoyproxy/ratelimit checks keys before it reads values: every key anywhere must be a string
   * from its list; lists may hold only maps. `metadata` holds anything.
   */
  #checkKeys(map: YAMLMap, path: string): void {
    for (const pair of map.items as Pair<Node | null, Node | null>[]) {
      const key = pair.key;
      const keyValue = isScalar(key) ? key.value : undefined;
      const line = this.#lineOf(key);
      if (typeof keyValue !== "string") {
        this.#fail(
          line,
          path,
          `config error, key is not of type string: ${isScalar(key) ? String(key.source ?? key.value) : "a map or list"}`,
        );
        continue;
      }
      const here = path === "" ? keyValue : `${path}.${keyValue}`;
      if (!VALID_KEYS.has(keyValue)) {
        this.#fail(line, here, `config error, unknown key '${keyValue}'`);
        continue;
      }
      if (keyValue === "metadata") continue;
      const value = pair.value;
      if (isMap(value)) this.#checkKeys(value, here);
      else if (isSeq(value)) {
        value.items.forEach((item, index) => {
          const itemPath = `${here}[${index}]`;
          if (isMap(item)) this.#checkKeys(item, itemPath);
          else {
            this.#fail(
              this.#lineOf(item as Node | null),
              itemPath,
              `config error, yaml file contains list of type other than map: ${describe(item as Node | null)}`,
            );
          }
        });
      }
    }
  }

  #descriptors(map: YAMLMap, path: string): YamlDescriptor[] {
    const node = map.get("descriptors", true) as Node | null | undefined;
    const here = path === "" ? "descriptors" : `${path}.descriptors`;
    if (node === undefined || node === null || isNull(node)) return [];
    if (!isSeq(node)) {
      this.#fail(this.#lineOf(node), here, "must be a list of descriptors");
      return [];
    }
    const found: YamlDescriptor[] = [];
    node.items.forEach((item, index) => {
      if (!isMap(item)) return; // reported by #checkKeys
      found.push(this.#descriptor(item, `${here}[${index}]`));
    });
    return found;
  }

  #descriptor(map: YAMLMap, path: string): YamlDescriptor {
    this.#warnMisplaced(map, path, DESCRIPTOR_KEYS, "a descriptor");
    const metadataNode = map.get("metadata", true) as Node | null | undefined;
    let metadata: Record<string, unknown> | undefined;
    if (metadataNode !== undefined && metadataNode !== null && !isNull(metadataNode)) {
      if (isMap(metadataNode)) metadata = metadataNode.toJSON() as Record<string, unknown>;
      else this.#fail(this.#lineOf(metadataNode), `${path}.metadata`, "must be a map");
    }
    return {
      key: this.#string(map, "key", path),
      value: this.#string(map, "value", path),
      rateLimit: this.#rateLimit(map, path),
      descriptors: this.#descriptors(map, path),
      shadowMode: this.#boolean(map, "shadow_mode", path),
      quotaMode: this.#boolean(map, "quota_mode", path),
      detailedMetric: this.#boolean(map, "detailed_metric", path),
      valueToMetric: this.#boolean(map, "value_to_metric", path),
      shareThreshold: this.#boolean(map, "share_threshold", path),
      metadata,
      metadataLine: this.#lineOf(metadataNode ?? null),
      line: this.#lineOf(map),
    };
  }

  #rateLimit(descriptor: YAMLMap, path: string): YamlRateLimit | undefined {
    const node = descriptor.get("rate_limit", true) as Node | null | undefined;
    const here = `${path}.rate_limit`;
    if (node === undefined || node === null || isNull(node)) return undefined;
    if (!isMap(node)) {
      this.#fail(this.#lineOf(node), here, "must be a map with unit and requests_per_unit");
      return undefined;
    }
    this.#warnMisplaced(node, here, RATE_LIMIT_KEYS, "rate_limit");
    const replacesNode = node.get("replaces", true) as Node | null | undefined;
    const replaces: YamlReplaces[] = [];
    if (replacesNode !== undefined && replacesNode !== null && !isNull(replacesNode)) {
      if (!isSeq(replacesNode)) {
        this.#fail(this.#lineOf(replacesNode), `${here}.replaces`, "must be a list of { name }");
      } else {
        replacesNode.items.forEach((item, index) => {
          if (!isMap(item)) return; // reported by #checkKeys
          const itemPath = `${here}.replaces[${index}]`;
          this.#warnMisplaced(item, itemPath, REPLACES_KEYS, "a replaces entry");
          replaces.push({ name: this.#string(item, "name", itemPath), line: this.#lineOf(item) });
        });
      }
    }
    return {
      requestsPerUnit: this.#uint32(node, "requests_per_unit", here),
      unit: this.#string(node, "unit", here),
      unlimited: this.#boolean(node, "unlimited", here),
      name: this.#string(node, "name", here),
      replaces,
      line: this.#lineOf(node),
      unitLine: this.#lineOf((node.get("unit", true) as Node | undefined) ?? node),
    };
  }

  /** A string field: any scalar, as written (`value: 012` is the string "012"). */
  #string(map: YAMLMap, key: string, path: string): string {
    const node = map.get(key, true) as Node | null | undefined;
    if (node === undefined || node === null || isNull(node)) return "";
    if (isScalar(node)) {
      if (typeof node.value === "string") return node.value;
      return String(node.source ?? node.value);
    }
    this.#fail(this.#lineOf(node), join(path, key), `must be a string, not ${describe(node)}`);
    return "";
  }

  #boolean(map: YAMLMap, key: string, path: string): boolean {
    const node = map.get(key, true) as Node | null | undefined;
    if (node === undefined || node === null || isNull(node)) return false;
    if (isScalar(node) && typeof node.value === "boolean") return node.value;
    this.#fail(this.#lineOf(node), join(path, key), `must be true or false, not ${describe(node)}`);
    return false;
  }

  #uint32(map: YAMLMap, key: string, path: string): number {
    const node = map.get(key, true) as Node | null | undefined;
    if (node === undefined || node === null || isNull(node)) return 0;
    if (isScalar(node)) {
      const value = node.value;
      if (typeof value === "number" && Number.isInteger(value) && value >= 0) {
        if (value <= MAX_UINT32) return value;
      }
    }
    this.#fail(
      this.#lineOf(node),
      join(path, key),
      `must be a whole number from 0 to ${MAX_UINT32}, not ${describe(node)}`,
    );
    return 0;
  }

  /** A key from the valid list in a place where envoyproxy/ratelimit ignores it. */
  #warnMisplaced(map: YAMLMap, path: string, allowed: ReadonlySet<string>, where: string): void {
    for (const pair of map.items as Pair<Node | null, Node | null>[]) {
      const key = isScalar(pair.key) ? pair.key.value : undefined;
      if (typeof key !== "string" || !VALID_KEYS.has(key) || allowed.has(key)) continue;
      this.#warn(
        this.#lineOf(pair.key),
        join(path, key),
        `'${key}' has no effect in ${where} (envoyproxy/ratelimit ignores it there too); ${hintFor(key)}`,
      );
    }
  }

  #lineOf(node: Node | null | undefined): number {
    const offset = node?.range?.[0];
    return offset === undefined ? 1 : this.#lines.linePos(offset).line;
  }

  #fail(line: number, path: string, message: string): void {
    this.issues.push({ file: this.#name, path, line, message, code: "EL_RLS_CONFIG" });
  }

  #warn(line: number, path: string, message: string): void {
    this.#warnings.push({ file: this.#name, path, line, message, code: "EL_RLS_CONFIG" });
  }
}

function hintFor(key: string): string {
  if (key === "domain") return "it belongs at the top of the file";
  if (RATE_LIMIT_KEYS.has(key)) return "put it under rate_limit";
  if (DESCRIPTOR_KEYS.has(key)) return "put it on the descriptor";
  return "remove it";
}

function isNull(node: Node): boolean {
  return isScalar(node) && node.value === null;
}

function describe(node: Node | null): string {
  if (node === null) return "nothing";
  if (isMap(node)) return "a map";
  if (isSeq(node)) return "a list";
  if (isScalar(node)) return String(node.source ?? node.value);
  return "a value";
}

function join(path: string, key: string): string {
  return path === "" ? key : `${path}.${key}`;
}
