const INTERVAL_MS = 500;

export interface ProgressReporter<P> {
  /** Rewrites the line with `progress`, at most twice a second. */
  update(progress: P): void;
  /** Clears the line, if one was written. */
  done(): void;
}

/**
 * A progress line for long offline runs (replay, simulate), rewritten in place on stderr. Only
 * for a terminal: a redirected stderr (CI, a pipe, a file) gets nothing, and stdout, where the
 * report goes, never does. `describe` says one progress as a line; it is asked only when the
 * line is rewritten.
 */
export function progressReporter<P>(
  stream: NodeJS.WriteStream,
  describe: (progress: P, elapsedSeconds: number) => string,
  now: () => number = Date.now,
): ProgressReporter<P> | undefined {
  if (stream.isTTY !== true) return undefined;
  const started = now();
  let shown = started;
  let wrote = false;
  return {
    update(progress) {
      const time = now();
      if (time - shown < INTERVAL_MS) return;
      shown = time;
      stream.write(`\r${describe(progress, (time - started) / 1000)}\x1b[K`);
      wrote = true;
    },
    done() {
      if (wrote) stream.write("\r\x1b[K");
    },
  };
}

/** `, ETA 12 s` from the share done so far and the time it took; empty before any is done. */
export function eta(done: number, elapsedSeconds: number): string {
  if (!(done > 0) || done >= 1) return "";
  return `, ETA ${Math.max(0, Math.round((elapsedSeconds * (1 - done)) / done))} s`;
}
