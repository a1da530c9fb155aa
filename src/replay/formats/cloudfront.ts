import { ReplayError } from "../errors.js";
import { failure, makeRecord, type ParseResult } from "../record.js";
import { decodePercent, orUndefined, parseClock, parseDateAndTime } from "./text.js";
import type { FormatOptions, LineParser, LogFormat } from "./types.js";

/**
 * CloudFront standard access logs (legacy and v2 in W3C form): tab-separated, `#Version:` and
 * `#Fields:` header lines, date and time in UTC. The header names the columns, so a log with
 * fields removed or added is read by name; without one, the documented 33-field order applies.
 * CloudFront URL-encodes `cs-uri-stem`, `cs-uri-query` and `cs(User-Agent)`: one layer is
 * undone, which gives the path as the client sent it.
 */
export const DOCUMENTED_FIELDS = [
  "date",
  "time",
  "x-edge-location",
  "sc-bytes",
  "c-ip",
  "cs-method",
  "cs(Host)",
  "cs-uri-stem",
  "sc-status",
  "cs(Referer)",
  "cs(User-Agent)",
  "cs-uri-query",
  "cs(Cookie)",
  "x-edge-result-type",
  "x-edge-request-id",
  "x-host-header",
  "cs-protocol",
  "cs-bytes",
  "time-taken",
  "x-forwarded-for",
  "ssl-protocol",
  "ssl-cipher",
  "x-edge-response-result-type",
  "cs-protocol-version",
  "fle-status",
  "fle-encrypted-fields",
  "c-port",
  "time-to-first-byte",
  "x-edge-detailed-result-type",
  "sc-content-type",
  "sc-content-len",
  "sc-range-start",
  "sc-range-end",
] as const;

const DATE_LINE = /^\d{4}-\d{2}-\d{2}\t\d{2}:\d{2}:\d{2}\t/;

interface Columns {
  readonly date: number;
  readonly time: number;
  readonly ip: number;
  readonly method: number;
  readonly stem: number;
  readonly query: number;
  readonly userAgent: number;
  readonly status: number;
  readonly user: number;
  readonly plan: number;
  /** The highest index needed: a line with fewer columns is malformed. */
  readonly needed: number;
  /** The highest index read: a line with fewer columns (but all needed) was cut off. */
  readonly read: number;
}

function columnsOf(names: readonly string[], options: FormatOptions): Columns | string {
  const index = (name: string | undefined): number =>
    name === undefined ? -1 : names.indexOf(name);
  const columns = {
    date: index("date"),
    time: index("time"),
    ip: index("c-ip"),
    method: index("cs-method"),
    stem: index("cs-uri-stem"),
    query: index("cs-uri-query"),
    userAgent: index("cs(User-Agent)"),
    status: index("sc-status"),
    user: index(options.userField),
    plan: index(options.planField),
  };
  for (const required of ["date", "time", "c-ip", "cs-uri-stem"]) {
    if (!names.includes(required)) return `#Fields has no ${required} column`;
  }
  if (options.userField !== undefined && columns.user === -1) {
    return `--user-field ${options.userField}: no such column in #Fields`;
  }
  const needed = Math.max(columns.date, columns.time, columns.ip, columns.stem);
  const read = Math.max(needed, ...Object.values(columns));
  return { ...columns, needed, read };
}

class CloudFrontParser implements LineParser {
  readonly #options: FormatOptions;
  #columns: Columns | string;
  #lastDate = "";
  #lastDay = 0;

  constructor(options: FormatOptions) {
    this.#options = options;
    this.#columns = columnsOf(DOCUMENTED_FIELDS, options);
    if (typeof this.#columns === "string") {
      throw new ReplayError("EL_REPLAY_ARGUMENT", `cloudfront: ${this.#columns}`);
    }
  }

  parse(line: string, lineNumber: number): ParseResult {
    if (line.charCodeAt(0) === 35) {
      if (line.startsWith("#Fields:")) {
        const names = line.slice(8).trim().split(/\s+/);
        this.#columns = columnsOf(names, this.#options);
      }
      return null;
    }
    const columns = this.#columns;
    if (typeof columns === "string") return failure(columns);
    const cells = line.split("\t");
    if (cells.length <= columns.needed) {
      return failure(`expected tab-separated CloudFront fields, found ${cells.length}`);
    }
    const date = cells[columns.date] as string;
    if (date !== this.#lastDate) {
      this.#lastDay = parseDateAndTime(date, "00:00:00");
      this.#lastDate = date;
    }
    const clock = cells[columns.time] as string;
    const time = this.#lastDay + parseClock(clock);
    if (Number.isNaN(time)) return failure(`bad date or time "${date} ${clock}"`);
    const stem = decodePercent(cells[columns.stem] as string);
    const query = columns.query === -1 ? undefined : orUndefined(cells[columns.query]);
    const path = query === undefined ? stem : `${stem}?${decodePercent(query)}`;
    const method = columns.method === -1 ? "GET" : (cells[columns.method] ?? "GET");
    const agent = columns.userAgent === -1 ? undefined : orUndefined(cells[columns.userAgent]);
    const status = columns.status === -1 ? undefined : Number(cells[columns.status]);
    return makeRecord(
      time,
      orUndefined(cells[columns.ip]),
      method,
      path,
      agent === undefined ? undefined : decodePercent(agent),
      Number.isNaN(status) ? undefined : status,
      columns.user === -1 ? undefined : orUndefined(cells[columns.user]),
      columns.plan === -1 ? undefined : orUndefined(cells[columns.plan]),
      lineNumber,
      cells.length > columns.read ? undefined : `cut off after ${cells.length} fields`,
    );
  }
}

export const cloudfront: LogFormat = {
  name: "cloudfront",
  summary: "CloudFront standard access logs (W3C, tab-separated, #Fields header)",
  detect: (lines) =>
    lines.some((line) => line.startsWith("#Fields: date") || line.startsWith("#Version:")) ||
    lines.some((line) => DATE_LINE.test(line)),
  create: (options) => new CloudFrontParser(options),
};
