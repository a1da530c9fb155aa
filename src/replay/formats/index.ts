import { ReplayError } from "../errors.js";
import { alb } from "./alb.js";
import { combined, common } from "./clf.js";
import { cloudflare } from "./cloudflare.js";
import { cloudfront } from "./cloudfront.js";
import { jsonLines } from "./json-lines.js";
import type { LogFormat } from "./types.js";

export type { FormatOptions, LineParser, LogFormat } from "./types.js";

/** In detection order: the more specific formats first (combined before common, Cloudflare before JSON). */
export const FORMATS: readonly LogFormat[] = [
  cloudfront,
  alb,
  combined,
  common,
  cloudflare,
  jsonLines,
];

export function formatNamed(name: string): LogFormat {
  const format = FORMATS.find((candidate) => candidate.name === name);
  if (format === undefined) {
    throw new ReplayError(
      "EL_REPLAY_UNKNOWN_FORMAT",
      `unknown format "${name}"; the formats are ${FORMATS.map((f) => f.name).join(", ")}`,
    );
  }
  return format;
}

/** The format the first lines of a source are in, from the most specific down. */
export function detectFormat(lines: readonly string[], source: string): LogFormat {
  const sample = lines.filter((line) => line.trim() !== "").slice(0, 20);
  const format = FORMATS.find((candidate) => candidate.detect(sample));
  if (format === undefined) {
    throw new ReplayError(
      "EL_REPLAY_UNKNOWN_FORMAT",
      `${source}: cannot tell the log format from its first lines; give --format, one of ${FORMATS.map(
        (f) => `${f.name} (${f.summary})`,
      ).join("; ")}`,
    );
  }
  return format;
}
