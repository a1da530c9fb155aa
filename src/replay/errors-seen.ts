import { ReplayError } from "./errors.js";

export interface LineError {
  readonly source: string;
  readonly line: number;
  readonly reason: string;
  /** The line, cut to a readable length. */
  readonly text: string;
}

const SAMPLES = 10;
const SAMPLE_CHARS = 200;

/** Lines of one kind (malformed, truncated): counted, the first few kept with their numbers. */
export class SampledLines {
  count = 0;
  readonly samples: LineError[] = [];

  add(source: string, line: number, reason: string, text: string): void {
    this.count++;
    if (this.samples.length < SAMPLES) {
      const cut = text.length > SAMPLE_CHARS ? `${text.slice(0, SAMPLE_CHARS)}...` : text;
      this.samples.push({ source, line, reason, text: cut });
    }
  }
}

/**
 * Malformed lines: sampled, and the run stopped only when the user set `--max-errors` and more
 * than that many were seen.
 */
export class MalformedLines extends SampledLines {
  readonly #maxErrors: number | undefined;

  constructor(maxErrors: number | undefined) {
    super();
    this.#maxErrors = maxErrors;
  }

  override add(source: string, line: number, reason: string, text: string): void {
    super.add(source, line, reason, text);
    if (this.#maxErrors !== undefined && this.count > this.#maxErrors) {
      const first = this.samples
        .slice(0, 3)
        .map((sample) => `\n  ${sample.source}:${sample.line}: ${sample.reason}`)
        .join("");
      throw new ReplayError(
        "EL_REPLAY_TOO_MANY_ERRORS",
        `more than ${this.#maxErrors} malformed lines (--max-errors ${this.#maxErrors}); stopped at ${source}:${line}. The first were:${first}\nCheck --format, or raise --max-errors.`,
      );
    }
  }
}

/** Lines that came later than the reorder window allows: replayed, but not in their place. */
export interface Lateness {
  late: number;
  /** The most a late line's time was behind what had been replayed, ms. */
  maxBehindMs: number;
}

/** What the readers saw besides records: every source of a replay adds to the same accounts. */
export interface SeenLines {
  readonly malformed: MalformedLines;
  /** Replayed, though cut off after their required fields. */
  readonly truncated: SampledLines;
  readonly lateness: Lateness;
}
