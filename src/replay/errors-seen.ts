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

/**
 * Malformed lines: counted, the first few kept with their line numbers, and the run stopped
 * only when the user set `--max-errors` and more than that many were seen.
 */
export class MalformedLines {
  count = 0;
  readonly samples: LineError[] = [];
  readonly #maxErrors: number | undefined;

  constructor(maxErrors: number | undefined) {
    this.#maxErrors = maxErrors;
  }

  add(source: string, line: number, reason: string, text: string): void {
    this.count++;
    if (this.samples.length < SAMPLES) {
      const cut = text.length > SAMPLE_CHARS ? `${text.slice(0, SAMPLE_CHARS)}...` : text;
      this.samples.push({ source, line, reason, text: cut });
    }
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
