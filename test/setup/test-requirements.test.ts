/**
 * `npm test` on a machine without the system packages the tests need: its first step
 * (scripts/test-requirements.ts) stops within seconds naming them and the command that installs
 * them, instead of failing two dozen files after minutes. The machine is made to lack them by
 * hiding their executables from PATH; as root with apt-get the same step installs them (what
 * `.ci/run` relies on), which a test cannot do without changing the machine.
 */
import { spawnSync } from "node:child_process";
import {
  chmodSync,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  symlinkSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { buildSync } from "esbuild";
import { afterAll, describe, expect, it } from "vitest";
import { executableOf } from "../support/system-packages.js";

const ROOT = join(import.meta.dirname, "../..");
/** Not root, where the tests run as root (CI): the check must not install anything. */
const NOT_ROOT = process.getuid?.() === 0 ? 65534 : undefined;
const dir = mkdtempSync(join(tmpdir(), "edgelimit-requirements-"));
chmodSync(dir, 0o755);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** What the user sees of redis-server and Chromium: not a single executable of either. */
const HIDDEN = /^(redis-server|redis-cli|chromium.*|google-chrome.*)$/;

/** A PATH of one folder that holds every executable of this PATH but the hidden ones. */
function pathWithout(hidden: RegExp): string {
  const bin = join(dir, "bin");
  mkdirSync(bin, { recursive: true });
  for (const folder of (process.env.PATH ?? "").split(delimiter)) {
    let names: string[];
    try {
      names = readdirSync(folder);
    } catch {
      continue;
    }
    for (const name of names) {
      if (hidden.test(name)) continue;
      try {
        symlinkSync(join(folder, name), join(bin, name));
      } catch {
        // The first folder on PATH that has the name wins, as in a shell.
      }
    }
  }
  return bin;
}

const hiddenPath = pathWithout(HIDDEN);

/**
 * The check as another user sees it. The project may sit in a folder that only its owner can
 * enter (a clone made in `mktemp -d`), so that user runs the same script bundled into this
 * test's world-readable folder, with the package list beside it where the script looks for it.
 */
const forOtherUser = join(dir, "requirements");
mkdirSync(join(forOtherUser, "scripts"), { recursive: true });
copyFileSync(join(ROOT, "test/system-packages.json"), join(forOtherUser, "system-packages.json"));
buildSync({
  entryPoints: [join(ROOT, "scripts/test-requirements.ts")],
  outfile: join(forOtherUser, "scripts/test-requirements.mjs"),
  bundle: true,
  platform: "node",
  format: "esm",
  logLevel: "warning",
});

function runCheck(env: Record<string, string>, uid?: number) {
  const started = performance.now();
  const [args, cwd] =
    uid === undefined
      ? [["--import", "tsx", "scripts/test-requirements.ts"], ROOT]
      : [["scripts/test-requirements.mjs"], forOtherUser];
  const result = spawnSync(process.execPath, args, {
    cwd,
    env: { HOME: dir, ...env },
    encoding: "utf8",
    timeout: 30_000,
    ...(uid === undefined ? {} : { uid, gid: uid }),
  });
  return { ...result, seconds: (performance.now() - started) / 1000 };
}

describe("npm test's first step, the system packages the tests need", () => {
  it("stops within seconds naming the missing packages and the command, where it cannot install", () => {
    // Not root: installing is the user's call, even where apt-get is there.
    const result = runCheck({ PATH: hiddenPath }, NOT_ROOT);
    expect(result.status).toBe(1);
    expect(result.seconds).toBeLessThan(10);
    expect(result.stderr).toContain("sudo apt-get install -y redis-server redis-tools chromium");
    for (const name of ["redis-server:", "redis-tools:", "chromium:"]) {
      expect(result.stderr).toContain(`\n  ${name}`);
    }
    // openssl is still on this PATH: only what is missing is asked for.
    expect(result.stderr).not.toContain("openssl");
    expect(result.stderr).toContain("set CHROMIUM_PATH to its executable");
  });

  it("says the same without apt-get, naming Debian's packages", () => {
    const bin = join(dir, "node-only");
    mkdirSync(bin);
    symlinkSync(process.execPath, join(bin, "node"));
    const result = runCheck({ PATH: bin });
    expect(result.status).toBe(1);
    expect(result.seconds).toBeLessThan(10);
    expect(result.stderr).toContain("apt-get install -y redis-server redis-tools chromium openssl");
    expect(result.stderr).toContain("without apt-get, install the same tools");
  });

  it("takes Chromium from CHROMIUM_PATH", () => {
    const chromium = executableOf("chromium");
    const result = runCheck({ PATH: hiddenPath, CHROMIUM_PATH: chromium }, NOT_ROOT);
    expect(result.status).toBe(1);
    expect(result.stderr).toContain("sudo apt-get install -y redis-server redis-tools\n");
    expect(executableOf("chromium", { PATH: hiddenPath, CHROMIUM_PATH: chromium })).toBe(chromium);
    expect(() => executableOf("chromium", { PATH: hiddenPath })).toThrow(
      /chromium is not installed .*apt-get install -y chromium, or set CHROMIUM_PATH/,
    );
  });

  it("finds Chromium under its usual names on PATH, not only at /usr/bin/chromium", () => {
    const bin = join(dir, "chrome-elsewhere");
    mkdirSync(bin);
    symlinkSync(executableOf("chromium"), join(bin, "google-chrome-stable"));
    expect(executableOf("chromium", { PATH: `${hiddenPath}${delimiter}${bin}` })).toBe(
      join(bin, "google-chrome-stable"),
    );
  });

  it("passes silently, and fast, on a machine that has them", () => {
    const result = runCheck({ PATH: process.env.PATH ?? "" });
    expect(result.stderr).toBe("");
    expect(result.stdout).toBe("");
    expect(result.status).toBe(0);
    expect(result.seconds).toBeLessThan(10);
  });
});
