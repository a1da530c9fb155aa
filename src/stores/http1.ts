import { connect as connectTcp, type Socket } from "node:net";
import { type StoreCallProgress, timeoutAfterPendingIo } from "../core/deadline.js";
import { EdgelimitError } from "../core/errors.js";

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

interface ParsedResponse extends Http1Response {
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
const FIELD_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
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

export interface Http1PoolOptions {
  /** `http://host:port` or `https://host:port`; requests go to this origin only. */
  readonly origin: URL;
  /** Sockets open at once (default 64); further requests wait for a free one. */
  readonly maxSockets?: number | undefined;
  readonly maxBodyBytes?: number | undefined;
  /**
   * Certificates trusted instead of Node's bundled roots, for a test server's self-signed
   * certificate. Verification itself is never turned off.
   */
  readonly ca?: string | Buffer | undefined;
}

type TlsModule = typeof import("node:tls");

type Deliver = (connection: Connection | undefined, failure?: Error) => void;

interface Exchange {
  readonly onResponse: (response: Http1Response) => void;
  readonly onFailure: (error: Error, retryable: boolean) => void;
  readonly reused: boolean;
  received: boolean;
}

interface Connection {
  readonly socket: Socket;
  readonly parser: ResponseParser;
  /** False until the TCP (and TLS) handshake is done. */
  ready: boolean;
  /** Called once when the handshake is done (one waiting exchange at most). */
  onReady: (() => void) | undefined;
  exchanges: number;
  current: Exchange | undefined;
  gone: boolean;
}

const STALE_SOCKET_ERRORS = new Set(["ECONNRESET", "EPIPE", "ECONNABORTED"]);

/**
 * A small keep-alive HTTP/1.1 client for one origin over `node:net` (and `node:tls`, loaded on
 * the first https connection): one request at a time per socket, never pipelined, bounded
 * sockets, idle sockets reused most recent first.
 *
 * Retries: a request is sent again, once, on a fresh socket only when it went out on a reused
 * keep-alive socket and that socket ended (EOF, ECONNRESET, EPIPE) before a single byte of the
 * response came back: the server closed the idle socket as we wrote to it. A DynamoDB
 * `UpdateItem` sent twice counts twice; that can only happen if the server applied it and then
 * dropped the connection without a byte of answer, and it errs towards over-counting (refusing
 * early), never towards admitting uncounted requests. Nothing else is retried: not a fresh
 * socket's failure (the endpoint is down), not a timeout (the budget is spent and the write may
 * have landed), not any answered or half-answered request.
 */
export class Http1Pool {
  readonly #origin: URL;
  readonly #host: string;
  readonly #port: number;
  readonly #maxSockets: number;
  readonly #maxBodyBytes: number;
  readonly #ca: string | Buffer | undefined;
  readonly #idle: Connection[] = [];
  readonly #waiting: Deliver[] = [];
  readonly #busy = new Set<Connection>();
  #open = 0;
  #tls: TlsModule | Promise<TlsModule> | undefined;

  constructor(options: Http1PoolOptions) {
    this.#origin = options.origin;
    const secure = options.origin.protocol === "https:";
    if (!secure && options.origin.protocol !== "http:") {
      throw new EdgelimitError("EL_BAD_ARGUMENT", `unsupported endpoint ${options.origin.href}`);
    }
    this.#host = options.origin.hostname.replace(/^\[|\]$/g, "");
    this.#port = Number(options.origin.port || (secure ? 443 : 80));
    this.#maxSockets = options.maxSockets ?? 64;
    this.#maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
    this.#ca = options.ca;
  }

  /** Sockets open now (idle and busy). */
  get openSockets(): number {
    return this.#open;
  }

  /**
   * Sends `POST path` with the given fields (names as given; `host` and `content-length` must be
   * among them) and resolves to the whole response. Fails with `EL_STORE_TIMEOUT` when no
   * complete response arrived within `timeoutMs` of the request being written on a connected
   * socket (the socket is destroyed; setting up a new socket has `timeoutMs` of its own, and
   * time spent waiting for a free socket is the caller's budget to bound, as with an Agent's
   * queue), `EL_STORE_FAILED` otherwise. A reply that has arrived is read before the timeout is
   * declared. `progress` hears of a new socket's setup, so that a decision budget does not run
   * during a handshake. `resendOnStaleSocket: false` is for requests that must not run twice
   * even in the rare case described on the class (a refund).
   */
  post(
    path: string,
    headers: Readonly<Record<string, string>>,
    body: string,
    timeoutMs: number,
    resendOnStaleSocket = true,
    progress?: StoreCallProgress,
  ): Promise<Http1Response> {
    let head = `POST ${path} HTTP/1.1\r\n`;
    for (const name in headers) {
      const value = headers[name] as string;
      if (/[\r\n\0]/.test(value) || !FIELD_NAME.test(name)) {
        return Promise.reject(
          new EdgelimitError(
            "EL_BAD_ARGUMENT",
            `header ${JSON.stringify(name)} has a bad name or value`,
          ),
        );
      }
      head += `${name}: ${value}\r\n`;
    }
    const message = `${head}\r\n${body}`;
    return new Promise<Http1Response>((resolve, reject) => {
      let settled = false;
      let connection: Connection | undefined;
      let cancelTimer: (() => void) | undefined;
      // Ends the report of a socket setup to `progress` (set while one is under way).
      let setupDone: (() => void) | undefined;
      const endSetup = (): void => {
        setupDone?.();
        setupDone = undefined;
      };
      const settle = (error: Error | undefined, response?: Http1Response): void => {
        if (settled) return;
        settled = true;
        cancelTimer?.();
        endSetup();
        if (error === undefined) resolve(response as Http1Response);
        else reject(error);
      };
      const startClock = (): void => {
        cancelTimer?.();
        cancelTimer = timeoutAfterPendingIo(
          timeoutMs,
          () => settled,
          () => {
            settle(
              new EdgelimitError("EL_STORE_TIMEOUT", `no complete answer within ${timeoutMs} ms`),
            );
            if (connection !== undefined) this.#discard(connection);
          },
        );
      };
      const attempt = (mayRetry: boolean): void => {
        if (this.#idle.length === 0 && this.#open < this.#maxSockets) {
          setupDone ??= progress?.connecting();
        }
        this.#acquire((acquired, failure) => {
          if (failure !== undefined) return settle(failure);
          const taken = acquired as Connection;
          if (settled) return this.#release(taken);
          connection = taken;
          startClock();
          if (taken.ready) endSetup();
          else {
            setupDone ??= progress?.connecting();
            // The answer's time runs from the end of the handshake.
            taken.onReady = () => {
              endSetup();
              if (!settled) startClock();
            };
          }
          this.#exchange(taken, message, {
            reused: taken.exchanges > 0,
            received: false,
            onResponse: (response) => settle(undefined, response),
            onFailure: (error, retryable) => {
              if (settled) return;
              if (mayRetry && retryable) attempt(false);
              else settle(error);
            },
          });
        });
      };
      attempt(resendOnStaleSocket);
    });
  }

  /**
   * Opens a socket now, when none is open, so that the first request finds its handshake done
   * (a Lambda@Edge function calls it while its module initialises). Failures are left to the
   * first request, which opens a socket of its own.
   */
  preconnect(): void {
    if (this.#open > 0) return;
    this.#open++;
    const open = (tls: TlsModule | undefined): void => {
      let connection: Connection;
      try {
        connection = this.#connect(tls);
      } catch {
        this.#open--;
        return;
      }
      if (connection.gone) return;
      this.#busy.delete(connection);
      connection.socket.unref();
      this.#idle.push(connection);
    };
    const tls = this.#origin.protocol === "https:" ? this.#loadTls() : undefined;
    if (tls instanceof Promise) {
      tls.then(open, () => {
        this.#open--;
      });
    } else open(tls);
  }

  /** Destroys every socket; requests in flight fail. The pool stays usable, like an Agent. */
  close(): void {
    const waiting = this.#waiting.splice(0);
    for (const connection of [...this.#idle, ...this.#busy]) this.#discard(connection);
    for (const deliver of waiting) {
      deliver(undefined, new EdgelimitError("EL_STORE_FAILED", "client closed"));
    }
  }

  #acquire(deliver: Deliver): void {
    const idle = this.#idle.pop();
    if (idle !== undefined) {
      idle.socket.ref();
      this.#busy.add(idle);
      deliver(idle);
      return;
    }
    if (this.#open >= this.#maxSockets) {
      this.#waiting.push(deliver);
      return;
    }
    this.#open++;
    const tls = this.#origin.protocol === "https:" ? this.#loadTls() : undefined;
    if (tls instanceof Promise) {
      tls.then(
        (loaded) => this.#connectFor(deliver, loaded),
        (error: Error) => this.#connectFor(deliver, error),
      );
      return;
    }
    this.#connectFor(deliver, tls);
  }

  /** Opens a socket for a slot already counted in `#open`; gives the slot back if it cannot. */
  #connectFor(deliver: Deliver, tls: TlsModule | Error | undefined): void {
    let connection: Connection;
    try {
      if (tls instanceof Error) throw tls;
      connection = this.#connect(tls);
    } catch (error) {
      // A bad TLS option (an unreadable `ca`) throws before any socket exists.
      this.#open--;
      deliver(undefined, new EdgelimitError("EL_STORE_FAILED", (error as Error).message));
      return;
    }
    deliver(connection);
  }

  #loadTls(): TlsModule | Promise<TlsModule> {
    // node:tls costs a fresh process a few ms: loaded by the first https connection only.
    this.#tls ??= import("node:tls").then((loaded) => {
      this.#tls = loaded;
      return loaded;
    });
    return this.#tls;
  }

  #connect(tls: TlsModule | undefined): Connection {
    const socket =
      tls === undefined
        ? connectTcp({ host: this.#host, port: this.#port, noDelay: true })
        : tls.connect({
            host: this.#host,
            port: this.#port,
            // SNI takes a host name, never an address literal.
            ...(isAddress(this.#host) ? {} : { servername: this.#host }),
            ...(this.#ca !== undefined ? { ca: this.#ca } : {}),
          });
    if (tls !== undefined) socket.setNoDelay(true);
    socket.setKeepAlive(true, 1000);
    const connection: Connection = {
      socket,
      parser: new ResponseParser(this.#maxBodyBytes),
      ready: false,
      onReady: undefined,
      exchanges: 0,
      current: undefined,
      gone: false,
    };
    socket.once(tls === undefined ? "connect" : "secureConnect", () => {
      connection.ready = true;
      const onReady = connection.onReady;
      connection.onReady = undefined;
      onReady?.();
    });
    this.#busy.add(connection);
    socket.on("data", (data: Buffer) => this.#onData(connection, data));
    socket.on("end", () => this.#onEnd(connection));
    socket.on("error", (error: NodeJS.ErrnoException) => {
      const exchange = connection.current;
      const stale =
        exchange?.reused === true &&
        !exchange.received &&
        STALE_SOCKET_ERRORS.has(error.code ?? "");
      this.#fail(connection, new EdgelimitError("EL_STORE_FAILED", error.message), stale);
    });
    socket.on("close", () =>
      this.#fail(connection, new EdgelimitError("EL_STORE_FAILED", "socket closed"), false),
    );
    return connection;
  }

  #exchange(connection: Connection, message: string, exchange: Exchange): void {
    connection.current = exchange;
    connection.exchanges++;
    connection.socket.write(message);
  }

  #onData(connection: Connection, data: Buffer): void {
    const exchange = connection.current;
    if (exchange === undefined) {
      // Bytes nobody asked for: the connection is out of step, so nothing on it can be trusted.
      this.#discard(connection);
      return;
    }
    exchange.received = true;
    let responses: ParsedResponse[];
    try {
      responses = connection.parser.push(data);
    } catch (error) {
      this.#fail(connection, error as Error, false);
      return;
    }
    const response = responses[0];
    if (response === undefined) return;
    connection.current = undefined;
    exchange.onResponse({
      status: response.status,
      headers: response.headers,
      body: response.body,
    });
    // A second response, or bytes after the first, answer nothing we sent.
    if (!response.reusable || responses.length > 1 || connection.parser.buffered > 0) {
      this.#discard(connection);
    } else {
      this.#release(connection);
    }
  }

  #onEnd(connection: Connection): void {
    const exchange = connection.current;
    if (exchange === undefined) {
      this.#discard(connection);
      return;
    }
    let response: ParsedResponse | undefined;
    try {
      response = connection.parser.end();
    } catch (error) {
      this.#fail(connection, error as Error, false);
      return;
    }
    if (response === undefined) {
      const error = new EdgelimitError("EL_STORE_FAILED", "connection closed before any answer");
      this.#fail(connection, error, exchange.reused && !exchange.received);
      return;
    }
    connection.current = undefined;
    exchange.onResponse({
      status: response.status,
      headers: response.headers,
      body: response.body,
    });
    this.#discard(connection);
  }

  #fail(connection: Connection, error: Error, retryable: boolean): void {
    const exchange = connection.current;
    connection.current = undefined;
    this.#discard(connection);
    exchange?.onFailure(error, retryable);
  }

  #release(connection: Connection): void {
    if (connection.gone) return;
    const next = this.#waiting.shift();
    if (next !== undefined) {
      next(connection);
      return;
    }
    this.#busy.delete(connection);
    // An idle socket must not keep the process alive (an Agent does the same).
    connection.socket.unref();
    this.#idle.push(connection);
  }

  #discard(connection: Connection): void {
    if (connection.gone) return;
    connection.gone = true;
    this.#open--;
    this.#busy.delete(connection);
    const at = this.#idle.indexOf(connection);
    if (at !== -1) this.#idle.splice(at, 1);
    connection.socket.destroy();
    const exchange = connection.current;
    if (exchange !== undefined) {
      connection.current = undefined;
      exchange.onFailure(new EdgelimitError("EL_STORE_FAILED", "connection closed"), false);
    }
    // A freed slot goes to the longest waiting request, on a new socket.
    const next = this.#waiting.shift();
    if (next !== undefined) this.#acquire(next);
  }
}

function isAddress(host: string): boolean {
  return /^[\d.]+$/.test(host) || host.includes(":");
}
