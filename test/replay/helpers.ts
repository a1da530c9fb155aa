import { readFileSync } from "node:fs";
import { join } from "node:path";
import { detectFormat, type FormatOptions, formatNamed } from "../../src/replay/formats/index.js";
import { isFailure, type LogRecord } from "../../src/replay/record.js";

export const FIXTURES = join(import.meta.dirname, "fixtures");

export function fixture(name: string): string {
  return join(FIXTURES, name);
}

/** Every line of a fixture through one format's parser: records and failures by line number. */
export function parseFixture(
  name: string,
  format?: string,
  options: Partial<FormatOptions> = {},
): { format: string; records: LogRecord[]; failures: Map<number, string> } {
  const lines = readFileSync(fixture(name), "utf8").split("\n");
  if (lines.at(-1) === "") lines.pop();
  const chosen = format === undefined ? detectFormat(lines, name) : formatNamed(format);
  const parser = chosen.create({
    fields: {},
    userField: undefined,
    planField: undefined,
    ...options,
  });
  const records: LogRecord[] = [];
  const failures = new Map<number, string>();
  lines.forEach((line, i) => {
    const result = parser.parse(line, i + 1);
    if (result === null) return;
    if (isFailure(result)) failures.set(i + 1, result.failure);
    else records.push(result);
  });
  return { format: chosen.name, records, failures };
}

/** A combined-log line at `time` (epoch ms) from `ip` for `path`. */
export function combinedLine(ip: string, time: number, path: string, agent = "test/1.0"): string {
  const date = new Date(time);
  const months = [
    "Jan",
    "Feb",
    "Mar",
    "Apr",
    "May",
    "Jun",
    "Jul",
    "Aug",
    "Sep",
    "Oct",
    "Nov",
    "Dec",
  ];
  const pad = (value: number) => String(value).padStart(2, "0");
  const stamp = `${pad(date.getUTCDate())}/${months[date.getUTCMonth()]}/${date.getUTCFullYear()}:${pad(date.getUTCHours())}:${pad(date.getUTCMinutes())}:${pad(date.getUTCSeconds())} +0000`;
  return `${ip} - - [${stamp}] "GET ${path} HTTP/1.1" 200 12 "-" "${agent}"`;
}

/** 2024-05-01T10:00:00Z: the synthetic logs' first minute. */
export const T0 = Date.UTC(2024, 4, 1, 10, 0, 0);
