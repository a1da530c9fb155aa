/**
 * One file of envoyproxy/ratelimit's configuration, read as that service reads it: YAML 1.1
 * (its parser's dialect: `yes` is true, `012` is 10), the keys and leaves checked first as it
 * checks them (config-keys.ts: a closed set of keys at every depth, lists of maps only, no
 * float where any value stands, no key twice in one mapping), scalar values taken as written
 * where a string is expected, and the first document only. Each problem is reported with its
 * line; the checks that span files (duplicate domains and descriptors, units, `replaces`) are in
 * config.ts.
 */
import {
  isMap,
  isScalar,
  isSeq,
  LineCounter,
  type Node,
  parseAllDocuments,
  type YAMLMap,
} from "yaml";
import type { PolicyIssue } from "../core/errors.js";
import {
  checkKeys,
  checkRepeatedKeys,
  DESCRIPTOR_KEYS,
  describe,
  join,
  type KeyReport,
  RATE_LIMIT_KEYS,
  REPLACES_KEYS,
  TOP_KEYS,
  warnMisplaced,
} from "./config-keys.js";

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
  readonly #report: KeyReport = {
    lineOf: (node) => this.#lineOf(node),
    fail: (line, path, message) => this.#fail(line, path, message),
    warn: (line, path, message) => this.#warn(line, path, message),
  };
  /** Values checkKeys refused as numbers: the readers of each field skip them. */
  #refused: ReadonlySet<Node> = new Set();

  constructor(name: string, text: string) {
    this.#name = name;
    this.#text = text;
  }

  /** The problems in the order of their lines (the checks run in several passes). */
  result(): { issues: PolicyIssue[]; warnings: PolicyIssue[] } {
    const byLine = (a: PolicyIssue, b: PolicyIssue) => (a.line ?? 0) - (b.line ?? 0);
    return { issues: this.issues.toSorted(byLine), warnings: this.#warnings.toSorted(byLine) };
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
    checkRepeatedKeys(root, this.#lines, this.#report);
    if (root === null || (isScalar(root) && root.value === null)) {
      this.#fail(1, "", "config file cannot have empty domain");
      return undefined;
    }
    if (!isMap(root)) {
      this.#fail(this.#lineOf(root), "", "the file must be a map with domain and descriptors");
      return undefined;
    }
    this.#refused = checkKeys(root, "", this.#report);
    warnMisplaced(root, "", TOP_KEYS, "the top of the file", this.#report);
    const domain = this.#string(root, "domain", "");
    const descriptors = this.#descriptors(root, "");
    return { name: this.#name, domain, descriptors, line: this.#lineOf(root) };
  }

  /** A field's node; undefined when absent or already refused by checkKeys. */
  #node(map: YAMLMap, key: string): Node | null | undefined {
    const found = map.get(key, true) as Node | null | undefined;
    return found !== undefined && found !== null && this.#refused.has(found) ? undefined : found;
  }

  #descriptors(map: YAMLMap, path: string): YamlDescriptor[] {
    const node = this.#node(map, "descriptors");
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
    warnMisplaced(map, path, DESCRIPTOR_KEYS, "a descriptor", this.#report);
    const metadataNode = this.#node(map, "metadata");
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
    const node = this.#node(descriptor, "rate_limit");
    const here = `${path}.rate_limit`;
    if (node === undefined || node === null || isNull(node)) return undefined;
    if (!isMap(node)) {
      this.#fail(this.#lineOf(node), here, "must be a map with unit and requests_per_unit");
      return undefined;
    }
    warnMisplaced(node, here, RATE_LIMIT_KEYS, "rate_limit", this.#report);
    const replacesNode = this.#node(node, "replaces");
    const replaces: YamlReplaces[] = [];
    if (replacesNode !== undefined && replacesNode !== null && !isNull(replacesNode)) {
      if (!isSeq(replacesNode)) {
        this.#fail(this.#lineOf(replacesNode), `${here}.replaces`, "must be a list of { name }");
      } else {
        replacesNode.items.forEach((item, index) => {
          if (!isMap(item)) return; // reported by #checkKeys
          const itemPath = `${here}.replaces[${index}]`;
          warnMisplaced(item, itemPath, REPLACES_KEYS, "a replaces entry", this.#report);
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
      unitLine: this.#lineOf(this.#node(node, "unit") ?? node),
    };
  }

  /** A string field: any scalar, as written (`value: 012` is the string "012"). */
  #string(map: YAMLMap, key: string, path: string): string {
    const node = this.#node(map, key);
    if (node === undefined || node === null || isNull(node)) return "";
    if (isScalar(node)) {
      if (typeof node.value === "string") return node.value;
      return String(node.source ?? node.value);
    }
    this.#fail(this.#lineOf(node), join(path, key), `must be a string, not ${describe(node)}`);
    return "";
  }

  #boolean(map: YAMLMap, key: string, path: string): boolean {
    const node = this.#node(map, key);
    if (node === undefined || node === null || isNull(node)) return false;
    if (isScalar(node) && typeof node.value === "boolean") return node.value;
    this.#fail(this.#lineOf(node), join(path, key), `must be true or false, not ${describe(node)}`);
    return false;
  }

  #uint32(map: YAMLMap, key: string, path: string): number {
    const node = this.#node(map, key);
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

function isNull(node: Node): boolean {
  return isScalar(node) && node.value === null;
}
