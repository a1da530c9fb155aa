const INTERVAL_MS = 500;

export interface ProgressLine {
  /** Rewrites the line, at most twice a second; `text` is asked for it only then. */
  show(text: (elapsedSeconds: number) => string): void;
  /** Clears the line, if one was written. */
  done(): void;
}

/**
 * A progress line for long offline runs (replay, simulate), rewritten in place on stderr. Only
 * for a terminal: a redirected stderr (CI, a pipe, a file) gets nothing, and stdout, where the
 * report goes, never does.
 */
export function progressLine(
  stream: NodeJS.WriteStream,
  now: () => number = Date.now,
): ProgressLine | undefined {
  if (stream.isTTY !== true) return undefined;
  const started = now();
  let shown = started;
  let wrote = false;
  return {
    show(text) {
      const time = now();
      if (time - shown < INTERVAL_MS) return;
      shown = time;
      stream.write(`\r${text((time - started) / 1000)}\x1b[K`);
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
