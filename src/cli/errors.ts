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
