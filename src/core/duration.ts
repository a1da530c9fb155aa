import { EdgelimitError } from "./errors.js";
import type { WindowSpec } from "./types.js";

/**
 * The units a duration may use, and nothing else. One spelling per unit, lowercase, no space:
 * `1M` read as a minute by one tool is a month to its reader, and `window: 3600` is an hour to
 * whoever wrote it and 3.6 seconds to a parser that assumes milliseconds. Near misses are
 * errors that show the spelling to use.
 */
const UNIT_MS: Record<string, number> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
  w: 604_800_000,
};
const MONTH = "mo";
/**
 * The longest window: a year, in days (a leap year's 366d; `52w`, `8784h`) or in calendar
 * months (`12mo`). It holds every quota a limiter is asked for (a year is envoyproxy/ratelimit's
 * longest unit too), and every store can keep such a window: Redis writes a key's expiry as a
 * whole number of milliseconds (`PX`), which Lua prints exactly only below 1e14 ms (about 3,000
 * years), DynamoDB's TTL is epoch seconds, and `resetAt` must stay a date (JavaScript's dates end
 * at 8.64e15 ms). A window past it is a typo, refused where it is written rather than failing
 * every call of its rule in the store.
 */
export const MAX_WINDOW_MS = 366 * 86_400_000;
export const MAX_WINDOW_MONTHS = 12;
const PATTERN = /^(\d+)(ms|s|m|h|d|w|mo)$/;
/** Something that looks like an amount and a unit, to say how to spell it. */
const LOOSE = /^\s*(\d+)\s*([a-z]+)\s*$/i;
const LONG_UNITS: Record<string, string> = {
  msec: "ms",
  millisecond: "ms",
  milliseconds: "ms",
  sec: "s",
  secs: "s",
  second: "s",
  seconds: "s",
  min: "m",
  mins: "m",
  minute: "m",
  minutes: "m",
  hr: "h",
  hrs: "h",
  hour: "h",
  hours: "h",
  day: "d",
  days: "d",
  week: "w",
  weeks: "w",
  month: "mo",
  months: "mo",
};

/** The spellings a duration may use, for messages and docs. */
export const DURATION_HINT = 'a whole number and a unit: "500ms", "10s", "5m", "1h", "1d" or "1w"';
/** The same, for a window, which may also be calendar months. */
export const WINDOW_HINT =
  'a whole number and a unit: "10s", "60s", "1m", "1h", "1d", "1w" or "1mo" (calendar month, UTC)';

export interface DurationOptions {
  /** Calendar months (`1mo`) are allowed: windows only, since a month has no fixed length. */
  readonly months?: boolean;
  /** A bare number means milliseconds: only where that is documented (`budget: 50`). */
  readonly bareMilliseconds?: boolean;
  /** The longest the field may be, for a duration that becomes a timer (`budget`). */
  readonly maxMs?: number;
}

/**
 * The longest a decision may wait for its store (`budget`, `connectBudget`): a limiter that
 * waits longer answers no request in time, and a timer past 2^31 ms would fire at once.
 */
export const MAX_WAIT_MS = 60_000;

/**
 * Says what is wrong with a duration, in words that show the spelling to use, or returns
 * undefined when it is one the options accept.
 */
export function durationProblem(input: unknown, options: DurationOptions = {}): string | undefined {
  const problem = spellingProblem(input, options);
  if (problem !== undefined || options.maxMs === undefined) return problem;
  const window = typeof input === "number" ? { ms: input } : toWindow(String(input));
  if ("ms" in window && window.ms > options.maxMs) {
    return `must be at most ${formatWindow({ ms: options.maxMs })}; got ${JSON.stringify(input)}`;
  }
  return undefined;
}

function spellingProblem(input: unknown, options: DurationOptions): string | undefined {
  const hint = options.months ? WINDOW_HINT : DURATION_HINT;
  if (typeof input === "number") {
    if (options.bareMilliseconds && Number.isSafeInteger(input) && input > 0) return undefined;
    return bareNumberProblem(input, options);
  }
  if (typeof input !== "string") return `must be ${hint}; got ${JSON.stringify(input)}`;
  if (/^\s*\d+\s*$/.test(input)) return bareNumberProblem(Number(input), options);
  const match = PATTERN.exec(input);
  if (match) {
    const amount = Number(match[1]);
    const unit = match[2] as string;
    if (amount < 1) return `must be at least 1${unit}; got "${input}"`;
    if (unit === MONTH && !options.months) {
      return `cannot be in calendar months (only a window can); write days instead, such as "30d"; got "${input}"`;
    }
    return options.months
      ? windowTooLong(amount, unit, input)
      : durationTooLong(amount, unit, input);
  }
  const loose = LOOSE.exec(input);
  if (loose) {
    const amount = loose[1] ?? "";
    const unit = loose[2] ?? "";
    if (unit === "M") {
      return options.months
        ? `"${input}" is ambiguous: write ${amount}m for a minute or ${amount}mo for a month`
        : `"${input}" is ambiguous: write ${amount}m for a minute (a month is not a fixed length; use days, such as "30d")`;
    }
    const lower = unit.toLowerCase();
    const spelling = UNIT_MS[lower] !== undefined || lower === MONTH ? lower : LONG_UNITS[lower];
    if (spelling !== undefined && (spelling !== MONTH || options.months)) {
      return `write "${Number(amount)}${spelling}" (units are lowercase, with no space); got "${input}"`;
    }
  }
  return `must be ${hint}; got ${JSON.stringify(input)}`;
}

/** A window longer than a year (MAX_WINDOW_MS, MAX_WINDOW_MONTHS), in words; else undefined. */
function windowTooLong(amount: number, unit: string, input: string): string | undefined {
  const fits =
    unit === MONTH ? amount <= MAX_WINDOW_MONTHS : amount * (UNIT_MS[unit] ?? 0) <= MAX_WINDOW_MS;
  if (fits) return undefined;
  return `must be at most a year: "366d" (or "52w"), or "12mo" in calendar months; got "${input}"`;
}

/** A duration whose milliseconds are past exact arithmetic (`100000000000000000000s`). */
function durationTooLong(amount: number, unit: string, input: string): string | undefined {
  if (Number.isSafeInteger(amount * (UNIT_MS[unit] ?? 0))) return undefined;
  return `is too long to count in milliseconds; got "${input}"`;
}

function bareNumberProblem(input: number, options: DurationOptions): string {
  const hint = options.months ? WINDOW_HINT : DURATION_HINT;
  if (!Number.isInteger(input) || input < 1) return `must be ${hint}; got ${input}`;
  if (!Number.isSafeInteger(input * 1000))
    return `is too long to count in milliseconds; got ${input}`;
  const asSeconds = formatWindow({ ms: input * 1000 });
  const seconds = asSeconds === `${input}s` ? `"${input}s"` : `"${input}s" or "${asSeconds}"`;
  return `a bare number is ambiguous here: write ${seconds} for ${input} seconds, or "${input}ms" for milliseconds; got ${input}`;
}

/**
 * Parses a window: "60s", "1m", "1h", "1d", "1w", "1mo" (see WINDOW_HINT). It takes a number
 * only to refuse it with the spelling to use, for callers from JavaScript.
 */
export function parseWindow(input: string | number): WindowSpec {
  const problem = durationProblem(input, { months: true });
  if (problem !== undefined) throw new EdgelimitError("EL_BAD_DURATION", `window ${problem}`);
  return toWindow(String(input));
}

/** Parses a duration that has a fixed length (no months); see DurationOptions. */
export function parseDurationMs(input: string | number, options: DurationOptions = {}): number {
  const problem = durationProblem(input, { ...options, months: false });
  if (problem !== undefined) throw new EdgelimitError("EL_BAD_DURATION", `duration ${problem}`);
  if (typeof input === "number") return input;
  const window = toWindow(input);
  return "ms" in window ? window.ms : 0;
}

/** Months are calendar months in UTC, so that "1000 calls a month" means the month on the bill. */
function toWindow(valid: string): WindowSpec {
  const [, amount = "", unit = ""] = PATTERN.exec(valid) ?? [];
  if (unit === MONTH) return { months: Number(amount) };
  return { ms: Number(amount) * (UNIT_MS[unit] ?? Number.NaN) };
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
