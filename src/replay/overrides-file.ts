/**
 * `edgelimit replay --overrides FILE`: operators' overrides (docs/overrides.md) applied to the
 * replayed traffic, so that a replay answers "what would this log have met with these
 * overrides in force". The file is YAML or JSON: a list of what `edgelimit override set` and
 * `limiter.overrides.set` take (`subject`, one of `limit`, `block` or `allow`, optionally
 * `rule` or `plan`, `until`, `note`), or `{ overrides: [...] }`. Each is checked against the
 * replayed policy as a store would check it; `until` is compared with the log's own times, so
 * an override that ended during the log applies up to its end.
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
import { ReplayError } from "./errors.js";

/** The file's entries, unchecked; throws a `ReplayError` for a file that is not a list of them. */
export function readOverridesFile(file: string): readonly OverrideInput[] {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new ReplayError("EL_REPLAY_ARGUMENT", `--overrides ${file}: cannot read it (${reason})`);
  }
  let parsed: unknown;
  try {
    parsed = parse(text);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new ReplayError(
      "EL_REPLAY_ARGUMENT",
      `--overrides ${file}: not YAML or JSON (${reason})`,
    );
  }
  const list =
    parsed !== null && typeof parsed === "object" && !Array.isArray(parsed)
      ? (parsed as { overrides?: unknown }).overrides
      : parsed;
  if (!Array.isArray(list) || list.some((entry) => entry === null || typeof entry !== "object")) {
    throw new ReplayError(
      "EL_REPLAY_ARGUMENT",
      `--overrides ${file}: expected a list of overrides (or overrides: [...]), each like { subject: "ip:203.0.113.7", limit: 500 }`,
    );
  }
  if (list.length > MAX_OVERRIDES) {
    throw new ReplayError(
      "EL_REPLAY_ARGUMENT",
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
