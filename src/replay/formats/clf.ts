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
    const tail = this.#tail(line, requestEnd);
    if (typeof tail === "string") return failure(tail);
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
      tail.userAgent,
      tail.status,
      user,
      undefined,
      lineNumber,
      tail.truncated,
    );
  }

  /**
   * What follows the request: status and bytes, then for combined `"referer" "user agent"`. A
   * line that ends early (a log cut off mid-line, the last field without its closing quote) keeps
   * what it has and says what is missing; a line that goes on with something else is malformed.
   */
  #tail(line: string, requestEnd: number): Tail | string {
    const end = line.length;
    const statusEnd = line.indexOf(" ", requestEnd + 2);
    if (statusEnd === -1) {
      // The status may itself be cut short: it is not trusted.
      const missing = requestEnd + 2 >= end ? "status, bytes" : "bytes";
      return cut(
        undefined,
        undefined,
        this.#combined ? `${missing}, referer, user agent` : missing,
      );
    }
    const status = Number(line.slice(requestEnd + 2, statusEnd));
    const known = Number.isNaN(status) ? undefined : status;
    const bytesEnd = line.indexOf(" ", statusEnd + 1);
    if (!this.#combined) return { status: known, userAgent: undefined, truncated: undefined };
    if (bytesEnd === -1 || bytesEnd + 1 === end)
      return cut(known, undefined, "referer, user agent");
    if (line.charCodeAt(bytesEnd + 1) !== 34) return COMBINED_TAIL_EXPECTED;
    const refererEnd = closingQuote(line, bytesEnd + 2);
    if (refererEnd === -1) return cut(known, undefined, "referer (no closing quote), user agent");
    if (refererEnd + 2 >= end) return cut(known, undefined, "user agent");
    if (line.charCodeAt(refererEnd + 1) !== 32 || line.charCodeAt(refererEnd + 2) !== 34) {
      return COMBINED_TAIL_EXPECTED;
    }
    const agentEnd = closingQuote(line, refererEnd + 3);
    const agent = line.slice(refererEnd + 3, agentEnd === -1 ? end : agentEnd);
    const userAgent = orUndefined(unescapeQuoted(agent));
    if (agentEnd === -1) return cut(known, userAgent, "user agent's end (no closing quote)");
    return { status: known, userAgent, truncated: undefined };
  }
}

interface Tail {
  readonly status: number | undefined;
  readonly userAgent: string | undefined;
  readonly truncated: string | undefined;
}

const COMBINED_TAIL_EXPECTED = 'expected "referer" "user agent" after status and bytes (combined)';

function cut(status: number | undefined, userAgent: string | undefined, missing: string): Tail {
  return { status, userAgent, truncated: `cut off: no ${missing}` };
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
