import { parseArgs } from "node:util";
import { uplotFiles } from "../charts/uplot.js";
import { readOverridesFile } from "../offline/overrides-file.js";
import { progressReporter } from "../offline/progress.js";
import { describeSimulation } from "../simulate/progress.js";
import { formatHtml } from "../simulate/report-html.js";
import { formatText } from "../simulate/report-text.js";
import { simulate } from "../simulate/run.js";
import { loadScenario, ScenarioError } from "../simulate/scenario.js";
import { parsedOrExit, usageError, writeCommandError } from "./errors.js";
import { writeReport } from "./report-output.js";
import { SIMULATE_USAGE } from "./usage.js";

const fail = (message: string): number => usageError("simulate", SIMULATE_USAGE, message);

export async function run(argv: string[]): Promise<number> {
  const parsed = parsedOrExit("simulate", SIMULATE_USAGE, () => parse(argv));
  if (typeof parsed === "number") return parsed;
  const { values, positionals } = parsed;
  if (positionals.length !== 1) return fail("give exactly one SCENARIO.yaml");
  let seed: number | undefined;
  if (values.seed !== undefined) {
    seed = Number(values.seed);
    if (!/^\d+$/.test(values.seed) || !Number.isSafeInteger(seed)) {
      return fail(`--seed ${values.seed}: expected a whole number, such as 1`);
    }
  }
  const progress =
    values["no-progress"] === true
      ? undefined
      : progressReporter(process.stderr, describeSimulation);
  try {
    const modes = values.modes?.split(",").map((mode) => mode.trim());
    const scenario = loadScenario(positionals[0] as string, modes);
    // Before the run: a missing optional package fails at once, not after minutes.
    const files = values.html === undefined ? undefined : uplotFiles("simulate --html");
    const overridesFile = values.overrides;
    const report = await simulate(scenario, {
      seed,
      onProgress: progress?.update,
      ...(overridesFile === undefined
        ? {}
        : { overrides: readOverridesFile(overridesFile), overridesFile }),
    });
    progress?.done();
    writeReport(
      values,
      report,
      () => formatText(report, scenario.busyAbove),
      () => formatHtml(report, scenario.busyAbove, files),
    );
    return 0;
  } catch (error) {
    progress?.done();
    if (writeCommandError("simulate", error, [ScenarioError])) return 2;
    throw error;
  }
}

function parse(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      json: { type: "boolean" },
      html: { type: "string" },
      seed: { type: "string" },
      modes: { type: "string" },
      overrides: { type: "string" },
      "no-progress": { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
  });
}
