import { readOverridesFile } from "../offline/overrides-file.js";
import { loadPolicy } from "../policy/load.js";
import { MalformedLines, SampledLines, type SeenLines } from "./errors-seen.js";
import { detectFormat, type FormatOptions, formatNamed } from "./formats/index.js";
import { expandInputs } from "./glob.js";
import { MergedSources, OrderedSource } from "./order.js";
import { openSource } from "./reader.js";
import { buildReport, type ReplayReport } from "./report.js";
import { PolicyReplay } from "./runner.js";
import type { TimeSeries } from "./series.js";

export interface ReplayOptions {
  readonly policy: string;
  /** A second policy replayed over the same traffic, side by side. */
  readonly compare?: string | undefined;
  /** Operators' overrides in force over the whole log, for each policy (overrides-file.ts). */
  readonly overrides?: string | undefined;
  /** Files, patterns or `-` (stdin). */
  readonly inputs: readonly string[];
  readonly format?: string | undefined;
  readonly fields?: Readonly<Record<string, string>>;
  readonly userField?: string | undefined;
  readonly planField?: string | undefined;
  readonly reorderMs?: number;
  readonly maxErrors?: number | undefined;
  /** Share of subjects a suggested limit may refuse (0.001 for 0.1%). */
  readonly refuseAtMost?: number;
  /** Let suggestions refuse subjects the current limits admit (`--tighten`). */
  readonly tighten?: boolean;
  readonly top?: number;
  readonly stdin?: NodeJS.ReadableStream;
  /** Called after every batch of records (progress display). */
  readonly onProgress?: (progress: Progress) => void;
}

export interface Progress {
  readonly lines: number;
  readonly bytesRead: number;
  /** Bytes of all inputs on disk, undefined when one is stdin. */
  readonly totalBytes: number | undefined;
  /** Records waiting in the reorder windows (bounded by the window's traffic). */
  readonly held: number;
}

export interface ReplayResult {
  readonly report: ReplayReport;
  /** Requests over time of the first policy, for the HTML page. */
  readonly series: TimeSeries;
  readonly replays: readonly PolicyReplay[];
}

export const DEFAULT_REORDER_MS = 60_000;
export const DEFAULT_REFUSE_AT_MOST = 0.001;

/** Reads the logs once, in time order, and drives each policy's limiter over them. */
export async function replayLogs(options: ReplayOptions): Promise<ReplayResult> {
  const withUsers = options.userField !== undefined;
  const file = options.overrides;
  const overrides = file === undefined ? [] : readOverridesFile(file);
  const replayOf = (policyFile: string) =>
    new PolicyReplay(policyFile, loadPolicy(policyFile), withUsers, overrides, file);
  const replays = [replayOf(options.policy)];
  if (options.compare !== undefined) replays.push(replayOf(options.compare));
  const reorderMs = options.reorderMs ?? DEFAULT_REORDER_MS;
  const seen: SeenLines = {
    malformed: new MalformedLines(options.maxErrors),
    truncated: new SampledLines(),
    lateness: { late: 0, maxBehindMs: 0 },
  };
  const formatOptions: FormatOptions = {
    fields: options.fields ?? {},
    userField: options.userField,
    planField: options.planField,
  };
  const forced = options.format === undefined ? undefined : formatNamed(options.format);

  const sources: OrderedSource[] = [];
  const inputs: { name: string; format: string }[] = [];
  for (const name of expandInputs(options.inputs)) {
    const lines = openSource(name, options.stdin);
    const first = await lines.next();
    if (first === undefined) {
      inputs.push({ name: lines.name, format: "(empty)" });
      continue;
    }
    const format = forced ?? detectFormat(first, lines.name);
    inputs.push({ name: lines.name, format: format.name });
    const parser = format.create(formatOptions);
    sources.push(new OrderedSource(sources.length, lines, parser, reorderMs, seen, first));
  }

  const merged = new MergedSources(sources);
  const totalBytes = sources.every((source) => source.lines.size !== undefined)
    ? sources.reduce((sum, source) => sum + (source.lines.size as number), 0)
    : undefined;
  let lines = 0;
  for (;;) {
    const batch = await merged.next();
    if (batch === undefined) break;
    for (let i = 0; i < batch.length; i++) {
      const record = batch[i] as (typeof batch)[number];
      for (let j = 0; j < replays.length; j++) {
        const pending = (replays[j] as PolicyReplay).replay(record);
        if (pending !== undefined) await pending;
      }
    }
    lines += batch.length;
    if (options.onProgress !== undefined) {
      let bytesRead = 0;
      let held = 0;
      for (const source of sources) {
        bytesRead += source.lines.bytesRead;
        held += source.held;
      }
      options.onProgress({ lines: lines + seen.malformed.count, bytesRead, totalBytes, held });
    }
  }

  const report = buildReport({
    replays,
    inputs,
    seen,
    reorderMs,
    withUsers,
    share: options.refuseAtMost ?? DEFAULT_REFUSE_AT_MOST,
    tighten: options.tighten === true,
    top: options.top ?? 10,
  });
  return { report, series: (replays[0] as PolicyReplay).tally.series, replays };
}
