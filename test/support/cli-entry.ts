/**
 * How a test starts the `edgelimit` CLI in a child process: `dist/cli/main.js` when it is newer
 * than every file under src/ (`npm test` builds it first; each process then starts some 0.2-1 s
 * sooner than through tsx, and the suite starts about a hundred), else src/cli/main.ts through
 * tsx, so that a test never runs a stale build.
 */
import { readdirSync, type Stats, statSync } from "node:fs";
import { join, resolve } from "node:path";

const ROOT = resolve(import.meta.dirname, "../..");
const BUILT = join(ROOT, "dist", "cli", "main.js");
const SOURCE = join(ROOT, "src", "cli", "main.ts");

let fresh: boolean | undefined;

/** Node's arguments that run the CLI, before the command's own (`serve`, `check FILE`, ...). */
export function cliEntry(): string[] {
  return builtIsFresh() ? [BUILT] : ["--import", "tsx", SOURCE];
}

/** Whether dist/ was built after the last change under src/ (checked once a test file). */
export function builtIsFresh(): boolean {
  if (fresh !== undefined) return fresh;
  const built = statOrUndefined(BUILT)?.mtimeMs;
  const newest = (directory: string): number =>
    readdirSync(directory, { withFileTypes: true }).reduce((latest, entry) => {
      const path = join(directory, entry.name);
      const time = entry.isDirectory() ? newest(path) : (statOrUndefined(path)?.mtimeMs ?? 0);
      return Math.max(latest, time);
    }, 0);
  fresh = built !== undefined && built > newest(join(ROOT, "src"));
  return fresh;
}

function statOrUndefined(path: string): Stats | undefined {
  try {
    return statSync(path);
  } catch {
    return undefined;
  }
}
