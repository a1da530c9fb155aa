#!/usr/bin/env node
/**
 * The `edgelimit` command. Each subcommand lives in its own module and is loaded on demand, so
 * that `edgelimit check` does not load the gateway.
 */
import { topLevelUsage } from "./usage.js";

const COMMANDS: Record<string, () => Promise<{ run(argv: string[]): Promise<number> }>> = {
  check: () => import("./check.js"),
  serve: () => import("./serve.js"),
  build: () => import("./build.js"),
  replay: () => import("./replay.js"),
  schema: () => import("./schema.js"),
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
  const module = await load();
  return module.run(rest);
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
