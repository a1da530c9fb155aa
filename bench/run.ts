/**
 * `npm run bench`: runs every `bench/*.bench.ts` in turn (or those named on the command line:
 * `npm run bench -- memory redis`), each in its own process so that one's warm-up or leftover
 * servers cannot skew the next.
 */
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const wanted = process.argv.slice(2);
const files = readdirSync(here)
  .filter((name) => name.endsWith(".bench.ts"))
  .filter((name) => wanted.length === 0 || wanted.some((word) => name.includes(word)))
  .sort();

let failed = 0;
for (const file of files) {
  process.stdout.write(`\n=== ${file} ===\n`);
  const result = spawnSync(process.execPath, ["--import", "tsx", join(here, file)], {
    stdio: "inherit",
  });
  if (result.status !== 0) failed++;
}
process.exitCode = failed === 0 ? 0 : 1;
