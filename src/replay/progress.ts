import type { Progress } from "./replay.js";

const INTERVAL_MS = 500;

function megabytes(bytes: number): string {
  return `${(bytes / 1_048_576).toFixed(1)} MB`;
}

/**
 * A progress line on stderr, rewritten in place, at most twice a second: lines read, lines per
 * second, bytes read and, when every input is a file, the time left. Only for a terminal: a
 * redirected stderr (CI, a pipe) gets nothing, and stdout (`--json`) never does.
 */
export function progressReporter(
  stream: NodeJS.WriteStream,
  now: () => number = Date.now,
): { update(progress: Progress): void; done(): void } | undefined {
  if (stream.isTTY !== true) return undefined;
  const started = now();
  let shown = started;
  let wrote = false;
  return {
    update(progress) {
      const time = now();
      if (time - shown < INTERVAL_MS) return;
      shown = time;
      const seconds = (time - started) / 1000;
      const rate = progress.lines / seconds;
      let eta = "";
      if (progress.totalBytes !== undefined && progress.bytesRead > 0) {
        const left = (seconds * (progress.totalBytes - progress.bytesRead)) / progress.bytesRead;
        eta = `, ETA ${Math.max(0, Math.round(left))} s`;
      }
      const total =
        progress.totalBytes === undefined ? "" : ` of ${megabytes(progress.totalBytes)}`;
      stream.write(
        `\r${progress.lines.toLocaleString("en-US")} lines, ${Math.round(rate).toLocaleString("en-US")} lines/s, ${megabytes(progress.bytesRead)}${total} read${eta}\x1b[K`,
      );
      wrote = true;
    },
    done() {
      if (wrote) stream.write("\r\x1b[K");
    },
  };
}
