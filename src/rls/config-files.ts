/**
 * `--config PATH`: one YAML file, or a directory of them read as envoyproxy/ratelimit reads its
 * runtime directory (every file below it, in subdirectories too, in name order), except that
 * names starting with a dot are always skipped: a Kubernetes ConfigMap volume keeps its previous
 * copy under `..data` and `..2024_…` entries, which would otherwise load every domain twice.
 */
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { EdgelimitError, type PolicyIssue } from "../core/errors.js";
import { formatIssue } from "../policy/load.js";
import { type BuildOptions, buildConfig, type RlsConfig } from "./config.js";
import { parseConfigFile, type YamlFile } from "./config-yaml.js";

export interface LoadedConfig {
  readonly config: RlsConfig;
  /** Keys envoyproxy/ratelimit ignores where they stand (see config-yaml.ts). */
  readonly warnings: readonly PolicyIssue[];
  /** A hash of every file's name and content: a reload that finds the same skips the swap. */
  readonly fingerprint: string;
}

/** Files deeper than this below `--config` are not read (a symlink loop ends here). */
const MAX_DEPTH = 8;

/** Reads and checks the configuration; throws `EL_RLS_CONFIG` with every problem found. */
export function loadRlsConfig(path: string, options: BuildOptions): LoadedConfig {
  const names = configFiles(path);
  const hash = createHash("sha256");
  const files: YamlFile[] = [];
  const issues: PolicyIssue[] = [];
  const warnings: PolicyIssue[] = [];
  for (const name of names) {
    let text: string;
    try {
      text = readFileSync(name, "utf8");
    } catch (error) {
      issues.push({
        file: name,
        path: "",
        message: `cannot read: ${(error as Error).message}`,
        code: "EL_RLS_CONFIG",
      });
      continue;
    }
    hash.update(name).update("\u0000").update(text).update("\u0000");
    const parsed = parseConfigFile(name, text);
    issues.push(...parsed.issues);
    warnings.push(...parsed.warnings);
    if (parsed.file !== undefined) files.push(parsed.file);
  }
  // The files that parsed are checked together even when others did not: every problem at once.
  const built = buildConfig(files, options);
  issues.push(...built.issues);
  if (built.config !== undefined && issues.length === 0) {
    return { config: built.config, warnings, fingerprint: hash.digest("hex") };
  }
  throw configError(path, issues);
}

/** The files `--config` names, in the order they load. */
export function configFiles(path: string): string[] {
  let stats: ReturnType<typeof statSync>;
  try {
    stats = statSync(path);
  } catch (error) {
    throw new EdgelimitError(
      "EL_RLS_CONFIG",
      `--config ${path}: cannot read it (${(error as Error).message}); give a YAML file or a directory of them`,
    );
  }
  if (!stats.isDirectory()) return [path];
  const found: string[] = [];
  collect(path, 0, found);
  return found;
}

function collect(directory: string, depth: number, found: string[]): void {
  if (depth > MAX_DEPTH) return;
  const names = readdirSync(directory)
    .filter((name) => !name.startsWith("."))
    .sort();
  for (const name of names) {
    const path = join(directory, name);
    let stats: ReturnType<typeof statSync>;
    try {
      stats = statSync(path);
    } catch {
      continue; // a dangling symlink: nothing to read
    }
    if (stats.isDirectory()) collect(path, depth + 1, found);
    else if (stats.isFile()) found.push(path);
  }
}

function configError(path: string, issues: readonly PolicyIssue[]): EdgelimitError {
  const lines = issues.map((issue) => `  ${formatIssue(issue)}`);
  return new EdgelimitError(
    "EL_RLS_CONFIG",
    `${path}: ${issues.length} problem${issues.length === 1 ? "" : "s"}\n${lines.join("\n")}`,
    issues,
  );
}
