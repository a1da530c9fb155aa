/**
 * `npm run simulate:expect`: rewrites test/simulate/expected/ci.json, the CI scenario's
 * `--json` report that test/simulate/expected.test.ts compares byte for byte. Review the diff
 * before committing it: a change there is a change in what the simulator (or the limiter it
 * drives) measures, and the commit message should say why.
 */
import { writeFileSync } from "node:fs";
import { simulate } from "../src/simulate/run.js";
import { loadScenario } from "../src/simulate/scenario.js";

const report = await simulate(loadScenario("test/simulate/fixtures/ci.yaml"));
writeFileSync("test/simulate/expected/ci.json", `${JSON.stringify(report, null, 2)}\n`);
process.stdout.write(
  "wrote test/simulate/expected/ci.json: review the diff (git diff test/simulate/expected)\n",
);
