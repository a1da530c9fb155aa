/**
 * `edgelimit replay --overrides FILE` and `edgelimit simulate --overrides FILE`: operators'
 * overrides (docs/overrides.md) in force over replayed or simulated traffic, so that either
 * answers "what would this traffic have met with these overrides". The file is YAML or JSON: a list of what `edgelimit override set` and
 * `limiter.overrides.set` take (`subject`, one of `limit`, `block` or `allow`, optionally
 * `rule` or `plan`, `until`, `note`), or `{ overrides: [...] }`. Each is checked against the
 * policy as a store would check it; `until` is compared with the traffic's own times (a log's,
 * the simulation's), so an override that ended during it applies up to its end.
 */
import { readFileSync } from "node:fs";
import { parse } from "yaml";
import { EdgelimitError } from "../core/errors.js";
import type { ResolvedPolicy } from "../core/model.js";
import {
  checkOverride,
  MAX_OVERRIDES,
  type Override,
  type OverrideInput,
} from "../core/overrides.js";

/** The file's entries, unchecked; throws `EL_OVERRIDE_FILE` for a file that is not a list of them. */
export function readOverridesFile(file: string): readonly OverrideInput[] {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new EdgelimitError("EL_OVERRIDE_FILE", `--overrides ${file}: cannot read it (${reason})`);
  }
  let parsed: unknown;
  try {
    parsed = parse(text);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new EdgelimitError(
      "EL_OVERRIDE_FILE",
      `--overrides ${file}: not YAML or JSON (${reason})`,
    );
  }
  const list =
    parsed !== null && typeof parsed === "object" && !Array.isArray(parsed)
      ? (parsed as { overrides?: unknown }).overrides
      : parsed;
  if (!Array.isArray(list) || list.some((entry) => entry === null || typeof entry !== "object")) {
    throw new EdgelimitError(
      "EL_OVERRIDE_FILE",
      `--overrides ${file}: expected a list of overrides (or overrides: [...]), each like { subject: "ip:203.0.113.7", limit: 500 }`,
    );
  }
  if (list.length > MAX_OVERRIDES) {
    throw new EdgelimitError(
      "EL_OVERRIDE_FILE",
      `--overrides ${file}: ${list.length} overrides; a store holds at most ${MAX_OVERRIDES}`,
    );
  }
  return list as OverrideInput[];
}

/**
 * The entries checked against `policy` (its rules and `overrides` bounds), each as set before
 * the log began. Throws the check's `EdgelimitError`, its message naming the file and entry.
 */
export function checkedOverrides(
  file: string,
  inputs: readonly OverrideInput[],
  policy: ResolvedPolicy,
): Override[] {
  return inputs.map((input, index) => {
    try {
      // Set at the epoch: any `until` is after it, and the log's times decide when it ends.
      return checkOverride(input, policy, 0);
    } catch (error) {
      if (!(error instanceof EdgelimitError)) throw error;
      throw new EdgelimitError(
        error.code,
        `--overrides ${file}: entry ${index + 1}: ${error.message}`,
      );
    }
  });
}
