import { ReplayError } from "../errors.js";
import { failure, makeRecord, type ParseResult } from "../record.js";
import { addressOfHostPort, orUndefined, parseIsoTime, pathOfTarget } from "./text.js";
import type { FormatOptions, LineParser, LogFormat } from "./types.js";

/**
 * Application Load Balancer access logs: space-separated, some fields quoted, in the
 * documented order `type time elb client:port target:port request_processing_time
 * target_processing_time response_processing_time elb_status_code target_status_code
 * received_bytes sent_bytes "request" "user_agent" ...` (later fields are not needed). `time` is
 * when the balancer answered, ISO 8601 in UTC. `request` is `"METHOD absolute-URL PROTOCOL"`,
 * or `"- - - "` when the balancer could not read one.
 */
const TYPES = new Set(["http", "https", "h2", "grpcs", "ws", "wss"]);
const FIELD = { time: 1, client: 3, status: 8, request: 12, userAgent: 13 } as const;
const NEEDED = FIELD.userAgent + 1;

/**
 * The first `count` fields of a line, quoted ones without their quotes, or as many as the line
 * has; `open` when the line ends inside the last one's quotes (cut off mid-field).
 */
function fields(line: string, count: number): { cells: string[]; open: boolean } {
  const cells: string[] = [];
  let i = 0;
  while (cells.length < count && i < line.length) {
    if (line.charCodeAt(i) === 34) {
      const close = line.indexOf('"', i + 1);
      if (close === -1) {
        cells.push(line.slice(i + 1));
        return { cells, open: true };
      }
      cells.push(line.slice(i + 1, close));
      i = close + 2;
    } else {
      let end = line.indexOf(" ", i);
      if (end === -1) end = line.length;
      cells.push(line.slice(i, end));
      i = end + 1;
    }
  }
  return { cells, open: false };
}

class AlbParser implements LineParser {
  constructor(options: FormatOptions) {
    if (options.userField !== undefined) {
      throw new ReplayError("EL_REPLAY_ARGUMENT", "--user-field: ALB access logs carry no user");
    }
  }

  parse(line: string, lineNumber: number): ParseResult {
    const { cells, open } = fields(line, NEEDED);
    // Up to the request, every field is needed whole; the user agent may be cut off.
    const requestWhole = cells.length > FIELD.request + 1 || (cells.length === NEEDED - 1 && !open);
    if (!requestWhole) return failure(`expected ${NEEDED} ALB fields up to "user_agent"`);
    const truncated =
      cells.length < NEEDED
        ? "cut off: no user agent"
        : open
          ? "cut off: no user agent's end (no closing quote)"
          : undefined;
    const time = parseIsoTime(cells[FIELD.time] as string);
    if (Number.isNaN(time)) return failure(`bad time "${cells[FIELD.time]}"`);
    const request = cells[FIELD.request] as string;
    const methodEnd = request.indexOf(" ");
    const targetEnd = request.indexOf(" ", methodEnd + 1);
    const method = request.slice(0, methodEnd);
    const target = request.slice(methodEnd + 1, targetEnd === -1 ? request.length : targetEnd);
    if (methodEnd <= 0 || method === "-" || target === "-" || target === "") {
      return failure(`request "${request}" is not METHOD URL PROTOCOL`);
    }
    const status = Number(cells[FIELD.status]);
    return makeRecord(
      time,
      addressOfHostPort(cells[FIELD.client] as string),
      method,
      pathOfTarget(target),
      orUndefined(cells[FIELD.userAgent]),
      Number.isNaN(status) ? undefined : status,
      undefined,
      undefined,
      lineNumber,
      truncated,
    );
  }
}

export const alb: LogFormat = {
  name: "alb",
  summary: "AWS Application Load Balancer access logs",
  detect: (lines) =>
    lines.some((line) => {
      const space = line.indexOf(" ");
      return TYPES.has(line.slice(0, space)) && line.charCodeAt(space + 11) === 84;
    }),
  create: (options) => new AlbParser(options),
};
