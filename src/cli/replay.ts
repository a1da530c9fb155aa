import { parseArgs } from "node:util";
import { uplotFiles } from "../charts/uplot.js";
import { parseDurationMs } from "../core/duration.js";
import { progressReporter } from "../offline/progress.js";
import { ReplayError } from "../replay/errors.js";
import { FORMATS } from "../replay/formats/index.js";
import { describeReplay } from "../replay/progress.js";
import { DEFAULT_REORDER_MS, replayLogs } from "../replay/replay.js";
import { formatHtml } from "../replay/report-html.js";
import { formatText } from "../replay/report-text.js";
import { parseShare } from "../replay/tuning.js";
import { parsedOrExit, usageError, writeCommandError } from "./errors.js";
import { writeReport } from "./report-output.js";
import { REPLAY_FORMAT_LINE, REPLAY_USAGE } from "./usage.js";

const USAGE = REPLAY_USAGE.replace(
  REPLAY_FORMAT_LINE,
  `${REPLAY_FORMAT_LINE.trimEnd()}:\n${FORMATS.map((format) => `                             ${format.name}: ${format.summary}`).join("\n")}\n`,
);

const fail = (message: string): number => usageError("replay", USAGE, message);

export async function run(argv: string[]): Promise<number> {
  const parsed = parsedOrExit("replay", USAGE, () => parse(argv));
  if (typeof parsed === "number") return parsed;
  const { values, positionals } = parsed;
  if (values.policy === undefined) return fail("--policy FILE is required");
  if (positionals.length === 0) return fail("no LOG given (a file, a pattern or - for stdin)");

  const fields: Record<string, string> = {};
  for (const entry of values.field ?? []) {
    const eq = entry.indexOf("=");
    if (eq <= 0) return fail(`--field ${entry}: expected NAME=PATH, such as ip=client.ip`);
    fields[entry.slice(0, eq)] = entry.slice(eq + 1);
  }
  let reorderMs = DEFAULT_REORDER_MS;
  if (values.reorder !== undefined) {
    try {
      reorderMs = /^\d+$/.test(values.reorder)
        ? Number(values.reorder) * 1000
        : parseDurationMs(values.reorder);
    } catch {
      return fail(`--reorder ${values.reorder}: expected a duration such as 30s, 1m or 5m`);
    }
  }
  const share = parseShare(values["refuse-at-most"] ?? "0.1%");
  if (Number.isNaN(share)) {
    return fail(
      `--refuse-at-most ${values["refuse-at-most"]}: expected a share such as 0.1% or 0.001`,
    );
  }
  const maxErrors = values["max-errors"] === undefined ? undefined : Number(values["max-errors"]);
  if (maxErrors !== undefined && (!Number.isInteger(maxErrors) || maxErrors < 0)) {
    return fail(`--max-errors ${values["max-errors"]}: expected a whole number`);
  }
  const top = Number(values.top ?? "10");
  if (!Number.isInteger(top) || top < 0)
    return fail(`--top ${values.top}: expected a whole number`);

  const progress =
    values["no-progress"] === true ? undefined : progressReporter(process.stderr, describeReplay);
  try {
    // Before the replay, not after it: a missing optional package fails in a second, not an hour.
    const files = values.html === undefined ? undefined : uplotFiles("replay --html");
    const result = await replayLogs({
      policy: values.policy,
      compare: values.compare,
      overrides: values.overrides,
      inputs: positionals,
      format: values.format,
      fields,
      userField: values["user-field"],
      planField: values["plan-field"],
      reorderMs,
      maxErrors,
      refuseAtMost: share,
      tighten: values.tighten === true,
      top,
      onProgress: progress?.update,
    });
    progress?.done();
    writeReport(
      values,
      result.report,
      () => formatText(result.report),
      () => formatHtml(result.report, result.series, files),
    );
    return 0;
  } catch (error) {
    progress?.done();
    if (writeCommandError("replay", error, [ReplayError])) return 1;
    throw error;
  }
}

function parse(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      policy: { type: "string" },
      compare: { type: "string" },
      overrides: { type: "string" },
      format: { type: "string" },
      field: { type: "string", multiple: true },
      "user-field": { type: "string" },
      "plan-field": { type: "string" },
      reorder: { type: "string" },
      "refuse-at-most": { type: "string" },
      tighten: { type: "boolean" },
      top: { type: "string" },
      "max-errors": { type: "string" },
      json: { type: "boolean" },
      html: { type: "string" },
      "no-progress": { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
  });
}
