import { ReplayError } from "../errors.js";
import { failure, makeRecord, type ParseResult } from "../record.js";
import { orUndefined, parseClfTime, pathOfTarget } from "./text.js";
import type { FormatOptions, LineParser, LogFormat } from "./types.js";

/**
 * The NCSA common log format and its `combined` extension, as nginx and Apache write them:
 * `host ident authuser [10/Oct/2000:13:55:36 -0700] "GET /p HTTP/1.1" 200 2326` and, for
 * combined, `"referer" "user agent"` after. Quoted fields may contain escaped quotes (`\"`
 * from Apache, `\x22` from nginx, which needs nothing special). `authuser` is the only user
 * field (`--user-field remote_user`).
 */
const CLF_LINE = /^\S+ \S+ \S+ \[[^\]]+\] "/;
const COMBINED_TAIL = /" \S+ \S+ "[^"]*" "/;

/** Index of the quote closing a field that starts after `start`, skipping `\"`; -1 if none. */
function closingQuote(line: string, start: number): number {
  let i = start;
  for (;;) {
    const quote = line.indexOf('"', i);
    if (quote === -1) return -1;
    let backslashes = 0;
    for (let j = quote - 1; j >= start && line.charCodeAt(j) === 92; j--) backslashes++;
    if (backslashes % 2 === 0) return quote;
    i = quote + 1;
  }
}

function unescapeQuoted(text: string): string {
  return text.indexOf("\\") === -1 ? text : text.replace(/\\(["\\])/g, "$1");
}

class ClfParser implements LineParser {
  readonly #combined: boolean;
  readonly #withUser: boolean;
  #lastTimeText = "";
  #lastTime = 0;
  #status: number | undefined;
  #userAgent: string | undefined;
  #truncated: string | undefined;

  constructor(combined: boolean, options: FormatOptions) {
    this.#combined = combined;
    const user = options.userField;
    if (user !== undefined && user !== "remote_user" && user !== "authuser") {
      throw new ReplayError(
        "EL_REPLAY_ARGUMENT",
        `--user-field ${user}: ${combined ? "combined" : "common"} logs carry only remote_user`,
      );
    }
    this.#withUser = user !== undefined;
  }

  parse(line: string, lineNumber: number): ParseResult {
    const hostEnd = line.indexOf(" ");
    const open = line.indexOf("[", hostEnd);
    const close = line.indexOf("]", open);
    if (hostEnd <= 0 || open === -1 || close === -1 || line.charCodeAt(close + 2) !== 34) {
      return failure('expected host ident user [time] "request" status bytes');
    }
    const timeText = line.slice(open + 1, close);
    if (timeText !== this.#lastTimeText) {
      this.#lastTime = parseClfTime(timeText);
      this.#lastTimeText = timeText;
    }
    const time = this.#lastTime;
    if (Number.isNaN(time)) return failure(`bad time [${timeText}]`);
    const requestEnd = closingQuote(line, close + 3);
    if (requestEnd === -1) return failure("unterminated request field");
    const request = line.slice(close + 3, requestEnd);
    const methodEnd = request.indexOf(" ");
    const targetEnd = request.indexOf(" ", methodEnd + 1);
    if (methodEnd <= 0) return failure(`request "${request}" is not METHOD TARGET PROTOCOL`);
    const target = request.slice(methodEnd + 1, targetEnd === -1 ? request.length : targetEnd);
    if (target === "") return failure(`request "${request}" has no target`);
    const problem = this.#tail(line, requestEnd);
    if (problem !== undefined) return failure(problem);
    let user: string | undefined;
    if (this.#withUser) {
      const identEnd = line.indexOf(" ", hostEnd + 1);
      user = orUndefined(line.slice(identEnd + 1, open - 1));
    }
    return makeRecord(
      time,
      orUndefined(line.slice(0, hostEnd)),
      request.slice(0, methodEnd),
      pathOfTarget(unescapeQuoted(target)),
      this.#userAgent,
      this.#status,
      user,
      undefined,
      lineNumber,
      this.#truncated,
    );
  }

  /**
   * What follows the request: status and bytes, then for combined `"referer" "user agent"`, read
   * into #status, #userAgent and #truncated (fields, not a new object per line). A line that ends
   * early (a log cut off mid-line, the last field without its closing quote) keeps what it has
   * and says in #truncated what is missing; a line that goes on with something else is
   * malformed: the reason is returned.
   */
  #tail(line: string, requestEnd: number): string | undefined {
    const end = line.length;
    this.#status = undefined;
    this.#userAgent = undefined;
    this.#truncated = undefined;
    const statusEnd = line.indexOf(" ", requestEnd + 2);
    if (statusEnd === -1) {
      // The status may itself be cut short: it is not trusted.
      const missing = requestEnd + 2 >= end ? "status, bytes" : "bytes";
      this.#truncated = cut(this.#combined ? `${missing}, referer, user agent` : missing);
      return undefined;
    }
    const status = Number(line.slice(requestEnd + 2, statusEnd));
    this.#status = Number.isNaN(status) ? undefined : status;
    if (!this.#combined) return undefined;
    const bytesEnd = line.indexOf(" ", statusEnd + 1);
    if (bytesEnd === -1 || bytesEnd + 1 === end) {
      this.#truncated = cut("referer, user agent");
      return undefined;
    }
    if (line.charCodeAt(bytesEnd + 1) !== 34) return COMBINED_TAIL_EXPECTED;
    const refererEnd = closingQuote(line, bytesEnd + 2);
    if (refererEnd === -1 || refererEnd + 2 >= end) {
      this.#truncated = cut(
        refererEnd === -1 ? "referer (no closing quote), user agent" : "user agent",
      );
      return undefined;
    }
    if (line.charCodeAt(refererEnd + 1) !== 32 || line.charCodeAt(refererEnd + 2) !== 34) {
      return COMBINED_TAIL_EXPECTED;
    }
    const agentEnd = closingQuote(line, refererEnd + 3);
    const agent = line.slice(refererEnd + 3, agentEnd === -1 ? end : agentEnd);
    this.#userAgent = orUndefined(unescapeQuoted(agent));
    if (agentEnd === -1) this.#truncated = cut("user agent's end (no closing quote)");
    return undefined;
  }
}

const COMBINED_TAIL_EXPECTED = 'expected "referer" "user agent" after status and bytes (combined)';

function cut(missing: string): string {
  return `cut off: no ${missing}`;
}

export const combined: LogFormat = {
  name: "combined",
  summary: 'nginx/Apache combined: common plus "referer" "user agent"',
  detect: (lines) => lines.some((line) => CLF_LINE.test(line) && COMBINED_TAIL.test(line)),
  create: (options) => new ClfParser(true, options),
};

export const common: LogFormat = {
  name: "common",
  summary: 'nginx/Apache common: host ident user [time] "request" status bytes',
  detect: (lines) => lines.some((line) => CLF_LINE.test(line)),
  create: (options) => new ClfParser(false, options),
};
