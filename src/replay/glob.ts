import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { ReplayError } from "./errors.js";

const GLOB_CHARS = /[*?[]/;

function segmentPattern(segment: string): RegExp {
  let pattern = "";
  for (let i = 0; i < segment.length; i++) {
    const char = segment[i] as string;
    if (char === "*") pattern += "[^/]*";
    else if (char === "?") pattern += "[^/]";
    else if (char === "[") {
      const close = segment.indexOf("]", i + 1);
      if (close === -1) pattern += "\\[";
      else {
        const body = segment
          .slice(i + 1, close)
          .replace(/^!/, "^")
          .replace(/\\/g, "\\\\");
        pattern += `[${body}]`;
        i = close;
      }
    } else pattern += char.replace(/[.+^${}()|\\]/g, "\\$&");
  }
  return new RegExp(`^${pattern}$`);
}

function walk(dir: string, segments: readonly string[], out: string[]): void {
  const [segment, ...rest] = segments;
  if (segment === undefined) {
    out.push(dir);
    return;
  }
  if (segment === "**") {
    walk(dir, rest, out);
    for (const entry of safeReaddir(dir)) {
      if (entry.startsWith(".")) continue;
      const path = join(dir, entry);
      if (isDirectory(path)) walk(path, segments, out);
    }
    return;
  }
  if (!GLOB_CHARS.test(segment)) {
    const path = join(dir, segment);
    if (rest.length === 0 ? exists(path) : isDirectory(path)) walk(path, rest, out);
    return;
  }
  const pattern = segmentPattern(segment);
  for (const entry of safeReaddir(dir).sort()) {
    if (entry.startsWith(".") && !segment.startsWith(".")) continue;
    if (!pattern.test(entry)) continue;
    const path = join(dir, entry);
    if (rest.length === 0 ? !isDirectory(path) : isDirectory(path)) walk(path, rest, out);
  }
}

function safeReaddir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

function exists(path: string): boolean {
  try {
    statSync(path);
    return true;
  } catch {
    return false;
  }
}

/**
 * The files named by the command line: `-` (stdin) and plain paths as they are, patterns
 * (`*`, `?`, `[...]`, `**`) expanded here, for shells that pass them through quoted and for a
 * day of CloudFront files too many for one command line. A pattern that matches nothing is an
 * error, not an empty replay.
 */
export function expandInputs(patterns: readonly string[]): string[] {
  const out: string[] = [];
  for (const pattern of patterns) {
    if (pattern === "-" || !GLOB_CHARS.test(pattern)) {
      out.push(pattern);
      continue;
    }
    const absolute = pattern.startsWith("/");
    const segments = pattern.split("/").filter((segment) => segment !== "" && segment !== ".");
    const matches: string[] = [];
    walk(absolute ? "/" : ".", segments, matches);
    if (matches.length === 0) {
      throw new ReplayError("EL_REPLAY_INPUT", `${pattern}: no file matches`);
    }
    out.push(...matches.sort());
  }
  return out;
}
