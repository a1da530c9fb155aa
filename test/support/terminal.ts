import { spawnSync } from "node:child_process";

/**
 * Runs a command with a terminal as its stdout and stderr (util-linux `script`, a real
 * pseudo-terminal), for what a program shows only on a terminal; returns everything written.
 */
export function onTerminal(
  command: readonly string[],
  timeoutMs = 120_000,
): { code: number | null; output: string } {
  const quoted = command.map((part) => `'${part.replace(/'/g, `'\\''`)}'`).join(" ");
  const result = spawnSync("script", ["-qec", quoted, "/dev/null"], {
    encoding: "utf8",
    timeout: timeoutMs,
    env: { ...process.env, EDGELIMIT_JWT_SECRET: "" },
  });
  return { code: result.status, output: result.stdout };
}
