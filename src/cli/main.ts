#!/usr/bin/env node
/**
 * The `edgelimit` command. Each subcommand lives in its own module and is loaded on demand, so
 * that `edgelimit check` does not load the gateway.
 */
const COMMANDS: Record<
  string,
  { summary: string; load: () => Promise<{ run(argv: string[]): Promise<number> }> }
> = {
  check: {
    summary:
      "check FILE [--json] [--target cloudflare]   validate a policy and print the rules it resolves to",
    load: () => import("./check.js"),
  },
  serve: {
    summary:
      "serve --policy FILE --upstream URL [--port 8080] [--admin-port 9090] [--store memory|redis://HOST:PORT|redis+cluster://H:P,H:P|dynamodb://TABLE?region=R&endpoint=URL] [--demo]",
    load: () => import("./serve.js"),
  },
  build: {
    summary:
      "build lambda-edge --policy FILE --store dynamodb://TABLE?region=R[&endpoint=URL][&regions=R1,R2] --out DIR",
    load: () => import("./build.js"),
  },
  replay: {
    summary:
      "replay --policy FILE [--format F] [--json] [--html FILE] [--compare FILE] LOG...   run a policy over access logs (--help for all options)",
    load: () => import("./replay.js"),
  },
};

function usage(): string {
  const lines = Object.values(COMMANDS).map(({ summary }) => `  edgelimit ${summary}`);
  return `Usage:\n${lines.join("\n")}\n`;
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === "--help" || name === "-h" || name === "help") {
    process.stdout.write(usage());
    return name === undefined ? 2 : 0;
  }
  if (name === "--version" || name === "-v") {
    const { createRequire } = await import("node:module");
    const pkg = createRequire(import.meta.url)("../../package.json") as { version: string };
    process.stdout.write(`${pkg.version}\n`);
    return 0;
  }
  const command = COMMANDS[name];
  if (command === undefined) {
    process.stderr.write(`edgelimit: unknown command "${name}"\n${usage()}`);
    return 2;
  }
  const module = await command.load();
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
