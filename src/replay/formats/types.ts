import type { ParseResult } from "../record.js";

export interface FormatOptions {
  /** Generic JSON lines: record field to the log's (dotted) field, `ip=client.ip`. */
  readonly fields: Readonly<Record<string, string>>;
  /** The log's field holding a user id (`--user-field`), in that format's own naming. */
  readonly userField: string | undefined;
  readonly planField: string | undefined;
}

/** Parses one source's lines in order; may keep state (CloudFront's `#Fields:` header). */
export interface LineParser {
  parse(line: string, lineNumber: number): ParseResult;
}

export interface LogFormat {
  readonly name: string;
  readonly summary: string;
  /** Whether these first lines of a source look like this format. */
  detect(lines: readonly string[]): boolean;
  create(options: FormatOptions): LineParser;
}
