import { EdgelimitError } from "./errors.js";
import type { WindowSpec } from "./types.js";

const UNIT_MS: Record<string, number> = {
  ms: 1,
  s: 1000,
  sec: 1000,
  second: 1000,
  seconds: 1000,
  m: 60_000,
  min: 60_000,
  minute: 60_000,
  minutes: 60_000,
  h: 3_600_000,
  hour: 3_600_000,
  hours: 3_600_000,
  d: 86_400_000,
  day: 86_400_000,
  days: 86_400_000,
  w: 604_800_000,
  week: 604_800_000,
  weeks: 604_800_000,
};
const MONTH_UNITS = new Set(["mo", "month", "months"]);
const PATTERN = /^\s*(\d+)\s*([a-z]+)\s*$/i;

/** The words a window or duration may use, for error messages. */
export const DURATION_HINT =
  'a number of milliseconds, or a string such as "10s", "60s", "1m", "1h", "1d", "1w" or "1mo" (calendar month, UTC)';

/**
 * Parses a window: a number (milliseconds) or "60s", "1m", "1h", "1d", "1w", "1mo".
 * Months are calendar months in UTC, so that "1000 calls a month" means the month on the bill.
 */
export function parseWindow(input: string | number): WindowSpec {
  if (typeof input === "number") {
    if (!Number.isInteger(input) || input < 1) {
      throw new EdgelimitError("EL_BAD_ARGUMENT", `window must be ${DURATION_HINT}; got ${input}`);
    }
    return { ms: input };
  }
  const match = PATTERN.exec(input);
  const amount = match ? Number(match[1]) : Number.NaN;
  const unit = match?.[2]?.toLowerCase() ?? "";
  if (!match || amount < 1) {
    throw new EdgelimitError("EL_BAD_ARGUMENT", `window must be ${DURATION_HINT}; got "${input}"`);
  }
  if (MONTH_UNITS.has(unit)) return { months: amount };
  const unitMs = UNIT_MS[unit];
  if (unitMs === undefined) {
    throw new EdgelimitError("EL_BAD_ARGUMENT", `window must be ${DURATION_HINT}; got "${input}"`);
  }
  return { ms: amount * unitMs };
}

/** Parses a duration that must be a fixed length (no months). */
export function parseDurationMs(input: string | number): number {
  const window = parseWindow(input);
  if ("months" in window) {
    throw new EdgelimitError(
      "EL_BAD_ARGUMENT",
      `a duration cannot be in months here; got "${input}"`,
    );
  }
  return window.ms;
}

/** Human form of a window for `edgelimit check` and docs: "60s", "1d", "1mo". */
export function formatWindow(window: WindowSpec): string {
  if ("months" in window) return `${window.months}mo`;
  const { ms } = window;
  for (const [unit, size] of [
    ["w", 604_800_000],
    ["d", 86_400_000],
    ["h", 3_600_000],
    ["m", 60_000],
    ["s", 1000],
  ] as const) {
    if (ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}
