import type { RuleTally } from "./tally.js";

export interface PeakDistribution {
  readonly subjects: number;
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
  readonly p999: number;
  readonly max: number;
}

export interface Suggestion {
  readonly ruleId: string;
  readonly currentLimit: number;
  /** The lowest limit under which at most `share` of the rule's subjects exceed it. */
  readonly suggestedLimit: number;
  /** Subjects that would still be refused at least once at that limit. */
  readonly refusedSubjects: number;
  readonly subjects: number;
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

/**
 * A subject whose peak is `p` is refused at some point exactly when `p > limit` (a fixed
 * window admits `limit` requests and refuses the next). With `k = floor(share * n)` subjects
 * allowed over, the limit is the `(n - k)`-th smallest peak: at most `k` peaks are above it,
 * and no lower limit has that property.
 */
export function suggestLimit(tally: RuleTally, sorted: Float64Array, share: number): Suggestion {
  const n = sorted.length;
  const allowedOver = Math.floor(share * n);
  const limit =
    n === 0 ? tally.rule.limit : (sorted[n - 1 - Math.min(allowedOver, n - 1)] as number);
  let over = 0;
  for (let i = n - 1; i >= 0 && (sorted[i] as number) > limit; i--) over++;
  return {
    ruleId: tally.rule.id,
    currentLimit: tally.rule.limit,
    suggestedLimit: limit,
    refusedSubjects: over,
    subjects: n,
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
