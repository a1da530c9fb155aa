/**
 * One request as an access log tells it: what replay hands the limiter. Every format's parser
 * produces this shape and nothing else.
 */
export interface LogRecord {
  /** When the request happened, epoch milliseconds (UTC). */
  time: number;
  /** The client address as the logging layer saw its peer; undefined when the log has none. */
  readonly ip: string | undefined;
  readonly method: string;
  /** Path with its query string, as the client sent it (a log's own encoding undone). */
  readonly path: string;
  readonly userAgent: string | undefined;
  readonly status: number | undefined;
  /** A user id, only with `--user-field` on a log that carries one. */
  readonly user: string | undefined;
  readonly plan: string | undefined;
  /** Line number in its source (1-based), for messages. */
  readonly line: number;
  /**
   * Set when the line was cut off after its required fields (address, time, request): what is
   * missing. Such a line is replayed, counted, and reported as truncated.
   */
  readonly truncated: string | undefined;
  /** Index of its source among the inputs. */
  source: number;
}

/** What a parser says about one line: a record, nothing to replay (a comment), or why not. */
export type ParseResult = LogRecord | null | ParseFailure;

export interface ParseFailure {
  readonly failure: string;
}

export function isFailure(result: ParseResult): result is ParseFailure {
  return result !== null && (result as ParseFailure).failure !== undefined;
}

export function failure(reason: string): ParseFailure {
  return { failure: reason };
}

export function makeRecord(
  time: number,
  ip: string | undefined,
  method: string,
  path: string,
  userAgent: string | undefined,
  status: number | undefined,
  user: string | undefined,
  plan: string | undefined,
  line: number,
  truncated: string | undefined = undefined,
): LogRecord {
  return { time, ip, method, path, userAgent, status, user, plan, line, truncated, source: 0 };
}
