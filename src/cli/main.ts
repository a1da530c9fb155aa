#!/usr/bin/env node
/**
 * The `edgelimit` command. Each subcommand lives in its own module and is loaded on demand, so
 * that `edgelimit check` does not load the gateway.
 */
import { topLevelUsage } from "./usage.js";

const COMMANDS: Record<string, () => Promise<{ run(argv: string[]): Promise<number> }>> = {
  check: () => import("./check.js"),
  serve: () => import("./serve.js"),
  rls: () => import("./rls.js"),
  build: () => import("./build.js"),
  replay: () => import("./replay.js"),
  simulate: () => import("./simulate.js"),
  schema: () => import("./schema.js"),
  override: () => import("./override.js"),
};

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined) {
    process.stderr.write(topLevelUsage());
    return 2;
  }
  if (name === "--help" || name === "-h" || name === "help") {
    process.stdout.write(topLevelUsage());
    return 0;
  }
  if (name === "--version" || name === "-v") {
    const { createRequire } = await import("node:module");
    const pkg = createRequire(import.meta.url)("../../package.json") as { version: string };
    process.stdout.write(`${pkg.version}\n`);
    return 0;
  }
  const load = COMMANDS[name];
  if (load === undefined) {
    process.stderr.write(`edgelimit: unknown command "${name}"\n\n${topLevelUsage()}`);
    return 2;
  }
  let module: { run(argv: string[]): Promise<number> };
  try {
    module = await load();
  } catch (error) {
    const missing = missingPackage(error);
    if (missing === undefined) throw error;
    const needs = OPTIONAL_PACKAGES[name] ?? [missing];
    process.stderr.write(
      `edgelimit ${name} needs the package ${missing}, which is not installed (it is optional, so that editions that do not use it do not install it): npm install ${needs.join(" ")}\n`,
    );
    return 1;
  }
  return module.run(rest);
}

/** What each command needs beyond edgelimit's own dependencies (peerDependencies, optional). */
const OPTIONAL_PACKAGES: Record<string, readonly string[]> = {
  serve: ["pino", "undici", "uplot"],
  rls: ["pino", "uplot"],
  build: ["esbuild"],
};

/** The package a failed import names, when it failed because the package is not installed. */
function missingPackage(error: unknown): string | undefined {
  if ((error as { code?: string } | undefined)?.code !== "ERR_MODULE_NOT_FOUND") return undefined;
  const match = /Cannot find package '([^']+)'/.exec((error as Error).message);
  return match?.[1];
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`edgelimit: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  },
);
