import type { RuleTally } from "./tally.js";

export interface PeakDistribution {
  readonly subjects: number;
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
  readonly p999: number;
  readonly max: number;
}

/**
 * A rule's peaks as evidence for a limit. A suggestion is made only from this many
 * subject-windows (a subject's requests in one window of the rule): below it, a handful of
 * visits would set a limit (a path seen once a minute by a few clients would get a limit of 1).
 */
export const MIN_SUBJECT_WINDOWS = 1_000;

export interface Suggestion {
  readonly ruleId: string;
  readonly currentLimit: number;
  /**
   * The lowest limit under which at most `share` of the rule's subjects would ever be refused,
   * from whatever traffic was seen: a statistic, not yet a suggestion.
   */
  readonly fits: number;
  /** The limit suggested; null when the current limit stays (see `withheld` for why, if any). */
  readonly suggestedLimit: number | null;
  /** Subjects that would be refused at least once at the suggested limit (else at `fits`). */
  readonly refusedSubjects: number;
  readonly subjects: number;
  readonly subjectWindows: number;
  /** The highest peak of the subjects the current limit admitted throughout (never refused). */
  readonly admittedPeak: number;
  /** Why no change is suggested though `fits` differs from the current limit. */
  readonly withheld: string | null;
}

/** Nearest-rank percentile of an ascending array. */
function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return 0;
  const rank = Math.max(1, Math.ceil(p * sorted.length));
  return sorted[Math.min(sorted.length, rank) - 1] as number;
}

/** Every subject's peak count per window under this rule, ascending. */
export function sortedPeaks(tally: RuleTally): Float64Array {
  const peaks = new Float64Array(tally.subjects.size);
  let i = 0;
  for (const subject of tally.subjects.values()) peaks[i++] = subject.peak;
  return peaks.sort();
}

export function distribution(sorted: Float64Array): PeakDistribution {
  return {
    subjects: sorted.length,
    p50: percentile(sorted, 0.5),
    p90: percentile(sorted, 0.9),
    p99: percentile(sorted, 0.99),
    p999: percentile(sorted, 0.999),
    max: sorted.length === 0 ? 0 : (sorted[sorted.length - 1] as number),
  };
}

function admittedPeakOf(tally: RuleTally): number {
  let peak = 0;
  for (const subject of tally.subjects.values()) {
    if (subject.refused === 0 && subject.peak > peak) peak = subject.peak;
  }
  return peak;
}

function over(sorted: Float64Array, limit: number): number {
  let count = 0;
  for (let i = sorted.length - 1; i >= 0 && (sorted[i] as number) > limit; i--) count++;
  return count;
}

/**
 * A subject whose peak is `p` is refused at some point exactly when `p > limit` (a fixed
 * window admits `limit` requests and refuses the next). With `k = floor(share * n)` subjects
 * allowed over, the limit that fits is the `(n - k)`-th smallest peak: at most `k` peaks are
 * above it, and no lower limit has that property.
 *
 * What is suggested is more careful than what fits. It never goes below the highest peak of the
 * subjects the current limit admits (lowering a limit should not start refusing clients who pass
 * today) unless `tighten`. It needs MIN_SUBJECT_WINDOWS of evidence. And it never raises a limit
 * when the share allows refusing none of the subjects seen (fewer than 1 / share of them): the
 * limit that fits is then the heaviest subject's peak, whoever that is (often the one scraper
 * the limit is there to refuse).
 */
export function suggestLimit(
  tally: RuleTally,
  sorted: Float64Array,
  share: number,
  tighten = false,
): Suggestion {
  const n = sorted.length;
  const limit = tally.rule.limit;
  const allowedOver = Math.floor(share * n);
  const fits = n === 0 ? limit : (sorted[n - 1 - Math.min(allowedOver, n - 1)] as number);
  const admittedPeak = admittedPeakOf(tally);
  const target = tighten ? fits : Math.max(fits, Math.min(admittedPeak, limit));
  let withheld: string | null = null;
  if (target !== limit) {
    if (tally.subjectWindows < MIN_SUBJECT_WINDOWS) {
      withheld = `${tally.subjectWindows.toLocaleString("en-US")} subject-window${tally.subjectWindows === 1 ? "" : "s"} seen; a suggestion needs ${MIN_SUBJECT_WINDOWS.toLocaleString("en-US")}`;
    } else if (target > limit && allowedOver === 0 && share > 0) {
      withheld = `refusing at most ${+(share * 100).toPrecision(3)}% of ${n.toLocaleString("en-US")} subjects refuses none: a higher limit would admit the heaviest subject (peak ${sorted[n - 1]}), whoever it is; a larger --refuse-at-most lets it be refused`;
    }
  }
  const suggestedLimit = withheld === null && target !== limit ? target : null;
  return {
    ruleId: tally.rule.id,
    currentLimit: limit,
    fits,
    suggestedLimit,
    refusedSubjects: over(sorted, suggestedLimit ?? fits),
    subjects: n,
    subjectWindows: tally.subjectWindows,
    admittedPeak,
    withheld,
  };
}

/** `0.1%`, `0.001` or `1` (percent when it has a `%`, a fraction otherwise) to a fraction. */
export function parseShare(text: string): number {
  const trimmed = text.trim();
  const percent = trimmed.endsWith("%");
  const value = Number(percent ? trimmed.slice(0, -1) : trimmed);
  const share = percent ? value / 100 : value;
  if (!Number.isFinite(share) || share < 0 || share >= 1) return Number.NaN;
  return share;
}
