/**
 * `npm test`'s first step: the system packages the tests need (test/system-packages.json) are
 * there, or are installed here, or the run stops at once naming them. As root with apt-get (a
 * fresh Debian machine, CI) it installs what is missing and says so; anywhere else it prints
 * the packages and the command that installs them, and exits 1 before the build or any test.
 */
import { spawnSync } from "node:child_process";
import {
  type Environment,
  missingPackages,
  onPath,
  type SystemPackage,
} from "../test/support/system-packages.js";

const env: Environment = process.env;

function explain(packages: readonly SystemPackage[]): string {
  return packages.map((entry) => `  ${entry.package}: ${entry.for}`).join("\n");
}

function aptGet(args: readonly string[]): boolean {
  // Another apt run (a colleague's, unattended upgrades) may hold the lock: wait for it.
  const result = spawnSync("apt-get", ["-o", "DPkg::Lock::Timeout=300", "-qq", ...args], {
    stdio: ["ignore", "ignore", "inherit"],
    env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" },
  });
  return result.status === 0;
}

function instructions(packages: readonly SystemPackage[]): string {
  const names = packages.map((entry) => entry.package).join(" ");
  const sudo = process.getuid?.() === 0 ? "" : "sudo ";
  const lines = [
    `npm test needs system packages that this machine lacks:\n${explain(packages)}`,
    `Install them, then run npm test again:\n  ${sudo}apt-get install -y ${names}`,
  ];
  if (onPath("apt-get", env) === undefined) {
    lines.push(
      "(Debian's names: without apt-get, install the same tools with your package manager.)",
    );
  }
  for (const entry of packages) {
    if (entry.env !== undefined) {
      lines.push(`${entry.package} installed elsewhere: set ${entry.env} to its executable.`);
    }
  }
  return `${lines.join("\n")}\n`;
}

function main(): number {
  const missing = missingPackages(env);
  if (missing.length === 0) return 0;
  const canInstall = process.getuid?.() === 0 && onPath("apt-get", env) !== undefined;
  if (!canInstall) {
    process.stderr.write(instructions(missing));
    return 1;
  }
  const names = missing.map((entry) => entry.package);
  process.stdout.write(
    `npm test: installing ${names.join(" ")} with apt-get (test/system-packages.json):\n${explain(missing)}\n`,
  );
  if (!aptGet(["update"]) || !aptGet(["install", "-y", ...names])) {
    process.stderr.write(`npm test: apt-get could not install ${names.join(" ")}\n`);
    process.stderr.write(instructions(missing));
    return 1;
  }
  const still = missingPackages(env);
  if (still.length > 0) {
    process.stderr.write(
      `npm test: apt-get installed ${names.join(" ")}, but these are still not found (is PATH missing their folder?):\n${explain(still)}\n`,
    );
    return 1;
  }
  return 0;
}

process.exitCode = main();
