/** Most buckets kept: a longer replay doubles the bucket width instead (memory stays bounded). */
const MAX_BUCKETS = 4096;

/**
 * Requests over time, allowed and refused, and refusals per rule, in buckets of one second that
 * widen (2 s, 4 s, ...) as the replay grows longer than MAX_BUCKETS of them. Records arrive in
 * time order, so the first one fixes the start.
 */
export class TimeSeries {
  start = Number.NaN;
  bucketMs = 1000;
  readonly allowed: number[] = [];
  readonly refused: number[] = [];
  /** Per rule (by its index in the policy): requests it refused, or would have (shadow). */
  readonly byRule: number[][];

  constructor(rules: number) {
    this.byRule = Array.from({ length: rules }, () => []);
  }

  /** The bucket of `time`, widening the buckets when it falls beyond the last one kept. */
  bucketOf(time: number): number {
    if (Number.isNaN(this.start)) this.start = Math.floor(time / 1000) * 1000;
    let bucket = Math.floor((time - this.start) / this.bucketMs);
    while (bucket >= MAX_BUCKETS) {
      this.#widen();
      bucket = Math.floor((time - this.start) / this.bucketMs);
    }
    const length = this.allowed.length;
    if (bucket >= length) {
      for (let i = length; i <= bucket; i++) {
        this.allowed.push(0);
        this.refused.push(0);
        for (const series of this.byRule) series.push(0);
      }
    }
    return Math.max(bucket, 0);
  }

  #widen(): void {
    this.bucketMs *= 2;
    for (const series of [this.allowed, this.refused, ...this.byRule]) {
      const merged: number[] = [];
      for (let i = 0; i < series.length; i += 2)
        merged.push((series[i] ?? 0) + (series[i + 1] ?? 0));
      series.length = 0;
      series.push(...merged);
    }
  }
}
