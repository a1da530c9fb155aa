import { eta } from "../offline/progress.js";
import { count } from "../offline/text.js";
import type { Progress } from "./replay.js";

function megabytes(bytes: number): string {
  return `${(bytes / 1_048_576).toFixed(1)} MB`;
}

/**
 * Replay's progress line (offline/progress.ts: stderr, a terminal only): lines read, lines per
 * second, bytes read and, when every input is a file, the time left.
 */
export function describeReplay(progress: Progress, seconds: number): string {
  const total = progress.totalBytes === undefined ? "" : ` of ${megabytes(progress.totalBytes)}`;
  const done = progress.totalBytes === undefined ? 0 : progress.bytesRead / progress.totalBytes;
  return `${count(progress.lines)} lines, ${count(progress.lines / seconds)} lines/s, ${megabytes(progress.bytesRead)}${total} read${eta(done, seconds)}`;
}
