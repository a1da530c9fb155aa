/**
 * A warning that is written at most once per interval, with the number of times it was
 * suppressed since: a store that fails on every request must not write a line per request.
 */
export class RateLimitedWarning {
  readonly #write: (line: string, suppressed: number) => void;
  readonly #intervalMs: number;
  readonly #clock: () => number;
  #lastAt = Number.NEGATIVE_INFINITY;
  #suppressed = 0;

  constructor(
    write: (line: string, suppressed: number) => void,
    intervalMs = 10_000,
    clock: () => number = Date.now,
  ) {
    this.#write = write;
    this.#intervalMs = intervalMs;
    this.#clock = clock;
  }

  warn(line: string): void {
    const now = this.#clock();
    if (now - this.#lastAt < this.#intervalMs) {
      this.#suppressed++;
      return;
    }
    const suppressed = this.#suppressed;
    this.#lastAt = now;
    this.#suppressed = 0;
    this.#write(line, suppressed);
  }
}

/** The cause of a store failure in words. */
export function causeOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
