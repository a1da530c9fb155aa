import { writeFileSync } from "node:fs";

/**
 * Writes an offline command's report (simulate, replay): JSON or text on stdout, and with
 * `--html` the page to that file, named after the text (not after JSON, which a pipe reads).
 */
export function writeReport(
  values: { readonly json?: boolean | undefined; readonly html?: string | undefined },
  report: unknown,
  text: () => string,
  page: () => string,
): void {
  if (values.html !== undefined) writeFileSync(values.html, page());
  process.stdout.write(values.json === true ? `${JSON.stringify(report, null, 2)}\n` : text());
  if (values.html !== undefined && values.json !== true) {
    process.stdout.write(`\nWrote ${values.html}\n`);
  }
}
