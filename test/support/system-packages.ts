/**
 * The system packages the tests need (test/system-packages.json) and where each one is on this
 * machine. `npm test` checks them before anything else (scripts/test-requirements.ts), and a
 * test that starts one of them finds it here, by the same rules, so the two never disagree.
 */
import { spawnSync } from "node:child_process";
import { accessSync, constants, readFileSync, statSync } from "node:fs";
import { delimiter, isAbsolute, join } from "node:path";

export interface SystemPackage {
  /** The Debian package's name. */
  readonly package: string;
  /** What needs it, for the message that asks for it. */
  readonly for: string;
  /** Executables that may provide it, the first found wins: names on PATH, or absolute paths. */
  readonly command?: readonly string[];
  /** An environment variable that may name the executable instead (`CHROMIUM_PATH`). */
  readonly env?: string;
  /** A command that exits 0 when the package is there, for what has no executable of its own. */
  readonly probe?: readonly string[];
}

export type Environment = Readonly<Record<string, string | undefined>>;

export const SYSTEM_PACKAGES_FILE = new URL("../system-packages.json", import.meta.url);

export function systemPackages(): SystemPackage[] {
  const parsed = JSON.parse(readFileSync(SYSTEM_PACKAGES_FILE, "utf8")) as {
    packages: SystemPackage[];
  };
  return parsed.packages;
}

/** Where the package is: its executable, or undefined when it is not installed. */
export function locate(entry: SystemPackage, env: Environment = process.env): string | undefined {
  const named = entry.env === undefined ? undefined : env[entry.env];
  if (named !== undefined && named !== "") return isExecutable(named) ? named : undefined;
  let found: string | undefined;
  for (const name of entry.command ?? []) {
    found = isAbsolute(name) ? (isExecutable(name) ? name : undefined) : onPath(name, env);
    if (found !== undefined) break;
  }
  if (entry.probe === undefined) return found;
  const [program, ...args] = entry.probe as [string, ...string[]];
  const probed = spawnSync(onPath(program, env) ?? program, args, { stdio: "ignore", env });
  return probed.status === 0 ? (found ?? program) : undefined;
}

/** The packages of the list that this machine lacks. */
export function missingPackages(env: Environment = process.env): SystemPackage[] {
  return systemPackages().filter((entry) => locate(entry, env) === undefined);
}

/** An executable named `name` in one of PATH's folders, as a shell would find it. */
export function onPath(name: string, env: Environment = process.env): string | undefined {
  for (const folder of (env.PATH ?? "").split(delimiter)) {
    if (folder === "") continue;
    const candidate = join(folder, name);
    if (isExecutable(candidate)) return candidate;
  }
  return undefined;
}

/**
 * The executable of the package the list names `name`, for a test that starts it; a test on a
 * machine without it fails with what to install (`npm test` installs it first where it can).
 */
export function executableOf(name: string, env: Environment = process.env): string {
  const entry = systemPackages().find((candidate) => candidate.package === name);
  if (entry === undefined) throw new Error(`${name} is not in test/system-packages.json`);
  const found = locate(entry, env);
  if (found !== undefined) return found;
  const named = entry.env === undefined ? undefined : env[entry.env];
  throw new Error(
    named !== undefined && named !== ""
      ? `${entry.env}=${named} is not an executable file: point it at ${name}'s executable`
      : `${name} is not installed (${entry.for}): apt-get install -y ${name}${entry.env === undefined ? "" : `, or set ${entry.env} to its executable`}`,
  );
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}
