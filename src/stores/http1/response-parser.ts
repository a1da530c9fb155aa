import { EdgelimitError } from "../../core/errors.js";

/** A response head (status line and header fields) larger than this is refused. */
export const MAX_HEAD_BYTES = 64 * 1024;
/** A response body larger than this is refused unless the pool is given another cap. */
export const DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024;
const MAX_CHUNK_LINE_BYTES = 4096;

export interface Http1Response {
  readonly status: number;
  /** Field names in lower case; a repeated field's values joined with ", ". */
  readonly headers: ReadonlyMap<string, string>;
  readonly body: Buffer;
}

export interface ParsedResponse extends Http1Response {
  /** Keep-alive and framed by length or chunks: the connection may carry the next request. */
  readonly reusable: boolean;
}

/** A response that breaks HTTP/1.1 framing: its connection is closed, the call fails. */
export class MalformedResponseError extends EdgelimitError {
  constructor(reason: string) {
    super("EL_STORE_FAILED", `malformed HTTP response: ${reason}`);
  }
}

type Phase = "head" | "length" | "chunk-size" | "chunk-data" | "chunk-end" | "trailers" | "close";

const STATUS_LINE = /^HTTP\/1\.([01]) ([1-9]\d\d)(?: [^\0\r\n]*)?$/;
/** A field name as RFC 9110 defines a token. */
export const FIELD_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const CHUNK_SIZE = /^[0-9A-Fa-f]{1,8}$/;
const DECIMAL = /^\d{1,15}$/;
const EMPTY = Buffer.alloc(0);

/**
 * Incremental HTTP/1.1 response parser: bytes go in as they arrive, split anywhere; complete
 * responses come out in order. Strict on framing (status line, field syntax, Content-Length,
 * chunk sizes, CRLF after each chunk) because a framing mistake would hand one request's
 * answer to the next; lenient only where RFC 9112 asks a client to be (obs-fold, 1xx skipped,
 * chunk extensions and trailers ignored).
 */
export class ResponseParser {
  readonly #maxBodyBytes: number;
  #buffer: Buffer = EMPTY;
  #phase: Phase = "head";
  #status = 0;
  #headers = new Map<string, string>();
  #reusable = true;
  #remaining = 0;
  #body: Buffer[] = [];
  #bodyBytes = 0;
  #trailerBytes = 0;
  #broken: Error | undefined;

  constructor(maxBodyBytes = DEFAULT_MAX_BODY_BYTES) {
    this.#maxBodyBytes = maxBodyBytes;
  }

  /** Bytes received and not yet part of a complete response. */
  get buffered(): number {
    return this.#buffer.length + (this.#phase === "head" && this.#broken === undefined ? 0 : 1);
  }

  /** Feeds bytes; returns the responses they complete. Throws `MalformedResponseError`. */
  push(data: Buffer): ParsedResponse[] {
    if (this.#broken !== undefined) throw this.#broken;
    this.#buffer = this.#buffer.length === 0 ? data : Buffer.concat([this.#buffer, data]);
    const complete: ParsedResponse[] = [];
    try {
      for (;;) {
        const done = this.#step();
        if (done === false) return complete;
        if (done !== true) complete.push(done);
      }
    } catch (error) {
      // Responses completed before the bad bytes still stand; the parser refuses anything more.
      if (complete.length === 0) throw error;
      this.#broken = error as Error;
      return complete;
    }
  }

  /** The peer closed the connection: ends a body read until close, or fails a partial one. */
  end(): ParsedResponse | undefined {
    if (this.#broken !== undefined) throw this.#broken;
    if (this.#phase === "close") return this.#finish();
    if (this.#phase === "head" && this.#buffer.length === 0) return undefined;
    throw new MalformedResponseError("connection closed in the middle of a response");
  }

  /** One step of parsing: a response, `true` for progress, `false` when more bytes are needed. */
  #step(): ParsedResponse | boolean {
    switch (this.#phase) {
      case "head":
        return this.#readHead();
      case "length": {
        if (this.#buffer.length === 0) return false;
        this.#take(Math.min(this.#remaining, this.#buffer.length));
        return this.#remaining === 0 ? this.#finish() : false;
      }
      case "chunk-size":
        return this.#readChunkSize();
      case "chunk-data": {
        if (this.#buffer.length === 0) return false;
        this.#take(Math.min(this.#remaining, this.#buffer.length));
        if (this.#remaining > 0) return false;
        this.#phase = "chunk-end";
        return true;
      }
      case "chunk-end": {
        if (this.#buffer.length < 2) {
          if (this.#buffer.length === 1 && this.#buffer[0] !== 13) {
            throw new MalformedResponseError("chunk data not followed by CRLF");
          }
          return false;
        }
        if (this.#buffer[0] !== 13 || this.#buffer[1] !== 10) {
          throw new MalformedResponseError("chunk data not followed by CRLF");
        }
        this.#buffer = this.#buffer.subarray(2);
        this.#phase = "chunk-size";
        return true;
      }
      case "trailers":
        return this.#readTrailer();
      case "close": {
        if (this.#buffer.length === 0) return false;
        this.#remaining = this.#buffer.length;
        this.#take(this.#buffer.length);
        return false;
      }
    }
  }

  #readHead(): ParsedResponse | boolean {
    const end = this.#buffer.indexOf("\r\n\r\n");
    if (end === -1) {
      if (this.#buffer.length > MAX_HEAD_BYTES) {
        throw new MalformedResponseError(`header section over ${MAX_HEAD_BYTES} bytes`);
      }
      if (this.#buffer.length >= 5 && this.#buffer.toString("latin1", 0, 5) !== "HTTP/") {
        throw new MalformedResponseError("bad status line");
      }
      return false;
    }
    if (end + 4 > MAX_HEAD_BYTES) {
      throw new MalformedResponseError(`header section over ${MAX_HEAD_BYTES} bytes`);
    }
    const lines = this.#buffer.toString("latin1", 0, end).split("\r\n");
    this.#buffer = this.#buffer.subarray(end + 4);
    const statusLine = STATUS_LINE.exec(lines[0] as string);
    if (statusLine === null) {
      throw new MalformedResponseError(`bad status line ${JSON.stringify(lines[0]?.slice(0, 80))}`);
    }
    const status = Number(statusLine[2]);
    const headers = parseFields(lines);
    if (status === 101) throw new MalformedResponseError("unexpected 101 Switching Protocols");
    // 100 Continue and other interim answers precede the real one: skip them.
    if (status < 200) return true;
    this.#status = status;
    this.#headers = headers;
    const connection = (headers.get("connection") ?? "").toLowerCase();
    this.#reusable =
      statusLine[1] === "1"
        ? !/(^|,)\s*close\s*(,|$)/.test(connection)
        : /keep-alive/.test(connection);
    this.#body = [];
    this.#bodyBytes = 0;
    this.#trailerBytes = 0;
    if (status === 204 || status === 304) return this.#finish();
    const transferEncoding = headers.get("transfer-encoding");
    const contentLength = headers.get("content-length");
    if (transferEncoding !== undefined) {
      // A response with both is suspect (RFC 9112 6.3): framed by the chunks, never reused.
      if (contentLength !== undefined) this.#reusable = false;
      const codings = transferEncoding.toLowerCase().split(",");
      if ((codings[codings.length - 1] as string).trim() === "chunked") {
        this.#phase = "chunk-size";
        return true;
      }
      return this.#untilClose();
    }
    if (contentLength !== undefined) {
      const values = contentLength.split(",").map((value) => value.trim());
      if (!values.every((value) => DECIMAL.test(value) && value === values[0])) {
        throw new MalformedResponseError(`bad Content-Length ${JSON.stringify(contentLength)}`);
      }
      const length = Number(values[0]);
      this.#grow(length);
      if (length === 0) return this.#finish();
      this.#remaining = length;
      this.#phase = "length";
      return true;
    }
    return this.#untilClose();
  }

  #untilClose(): true {
    this.#reusable = false;
    this.#phase = "close";
    return true;
  }

  #readChunkSize(): boolean {
    const end = this.#buffer.indexOf("\r\n");
    if (end === -1) {
      if (this.#buffer.length > MAX_CHUNK_LINE_BYTES) {
        throw new MalformedResponseError("chunk size line too long");
      }
      return false;
    }
    if (end > MAX_CHUNK_LINE_BYTES) throw new MalformedResponseError("chunk size line too long");
    const line = this.#buffer.toString("latin1", 0, end);
    this.#buffer = this.#buffer.subarray(end + 2);
    // Extensions (`;name=value`) carry nothing we use; whitespace before them is allowed.
    const semicolon = line.indexOf(";");
    const sizeText = (semicolon === -1 ? line : line.slice(0, semicolon)).replace(/[ \t]+$/, "");
    if (!CHUNK_SIZE.test(sizeText)) {
      throw new MalformedResponseError(`bad chunk size ${JSON.stringify(line.slice(0, 40))}`);
    }
    const size = Number.parseInt(sizeText, 16);
    if (size === 0) {
      this.#phase = "trailers";
      return true;
    }
    this.#grow(size);
    this.#remaining = size;
    this.#phase = "chunk-data";
    return true;
  }

  #readTrailer(): ParsedResponse | boolean {
    const end = this.#buffer.indexOf("\r\n");
    if (end === -1) {
      if (this.#trailerBytes + this.#buffer.length > MAX_HEAD_BYTES) {
        throw new MalformedResponseError(`trailer section over ${MAX_HEAD_BYTES} bytes`);
      }
      return false;
    }
    this.#trailerBytes += end + 2;
    if (this.#trailerBytes > MAX_HEAD_BYTES) {
      throw new MalformedResponseError(`trailer section over ${MAX_HEAD_BYTES} bytes`);
    }
    this.#buffer = this.#buffer.subarray(end + 2);
    // Trailer fields are read past, never merged into the headers.
    return end === 0 ? this.#finish() : true;
  }

  #grow(bytes: number): void {
    if (this.#bodyBytes + bytes > this.#maxBodyBytes) {
      throw new MalformedResponseError(`body over ${this.#maxBodyBytes} bytes`);
    }
  }

  #take(bytes: number): void {
    if (this.#phase === "close") this.#grow(bytes);
    this.#body.push(this.#buffer.subarray(0, bytes));
    this.#bodyBytes += bytes;
    this.#remaining -= bytes;
    this.#buffer = this.#buffer.subarray(bytes);
  }

  #finish(): ParsedResponse {
    const response = {
      status: this.#status,
      headers: this.#headers,
      body: this.#body.length === 1 ? (this.#body[0] as Buffer) : Buffer.concat(this.#body),
      reusable: this.#reusable,
    };
    this.#phase = "head";
    this.#body = [];
    this.#bodyBytes = 0;
    return response;
  }
}

function parseFields(lines: readonly string[]): Map<string, string> {
  const headers = new Map<string, string>();
  let last: string | undefined;
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i] as string;
    if (/[\0\r\n]/.test(line)) throw new MalformedResponseError("bare CR, LF or NUL in a field");
    if (line[0] === " " || line[0] === "\t") {
      // obs-fold: RFC 9112 5.2 asks a client to replace it with a space.
      if (last === undefined) throw new MalformedResponseError("folded line before any field");
      headers.set(last, `${headers.get(last)} ${line.trim()}`.trim());
      continue;
    }
    const colon = line.indexOf(":");
    const name = colon === -1 ? "" : line.slice(0, colon);
    if (!FIELD_NAME.test(name)) {
      throw new MalformedResponseError(`bad field line ${JSON.stringify(line.slice(0, 80))}`);
    }
    last = name.toLowerCase();
    const value = line.slice(colon + 1).trim();
    const before = headers.get(last);
    headers.set(last, before === undefined ? value : `${before}, ${value}`);
  }
  return headers;
}
