import { EdgelimitError } from "../core/errors.js";
import { formatIssue } from "../policy/load.js";

/**
 * Writes an error the way every command does: `edgelimit COMMAND: message (CODE)`, then each
 * policy issue on a line of its own. Returns false for anything that is not an EdgelimitError.
 */
export function writeEdgelimitError(
  command: string,
  error: unknown,
  message = (error as Error).message,
): boolean {
  if (!(error instanceof EdgelimitError)) return false;
  process.stderr.write(`edgelimit ${command}: ${message} (${error.code})\n`);
  for (const issue of error.issues) process.stderr.write(`  ${formatIssue(issue)}\n`);
  return true;
}

/** An error class of a command's own (`ReplayError`, `ScenarioError`): a message and a code. */
type CodedError = abstract new (...args: never[]) => Error & { readonly code: string };

/**
 * Writes a command's error, one of its own kinds (`own`) or an EdgelimitError, as
 * `edgelimit COMMAND: message (CODE)`. Returns false for anything else, which the caller rethrows.
 */
export function writeCommandError(
  command: string,
  error: unknown,
  own: readonly CodedError[],
): boolean {
  const known = own.find((kind) => error instanceof kind);
  if (known !== undefined) {
    const { message, code } = error as Error & { readonly code: string };
    process.stderr.write(`edgelimit ${command}: ${message} (${code})\n`);
    return true;
  }
  return writeEdgelimitError(command, error);
}

/** `edgelimit COMMAND: message`, then the command's usage, on stderr; the exit code 2. */
export function usageError(command: string, usage: string, message: string): number {
  process.stderr.write(`edgelimit ${command}: ${message}\n\n${usage}`);
  return 2;
}

/**
 * A command's arguments, parsed by `parse`; or the exit code when there is nothing more to do:
 * 2 after a parse error (with the usage), 0 after printing the usage for `--help`.
 */
export function parsedOrExit<
  T extends { readonly values: { readonly help?: boolean | undefined } },
>(command: string, usage: string, parse: () => T): T | number {
  let parsed: T;
  try {
    parsed = parse();
  } catch (error) {
    return usageError(command, usage, error instanceof Error ? error.message : String(error));
  }
  if (parsed.values.help === true) {
    process.stdout.write(usage);
    return 0;
  }
  return parsed;
}
