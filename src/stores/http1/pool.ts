import type { Socket } from "node:net";
import { type StoreCallProgress, timeoutAfterPendingIo } from "../../core/deadline.js";
import { EdgelimitError } from "../../core/errors.js";
import {
  DEFAULT_MAX_BODY_BYTES,
  FIELD_NAME,
  type Http1Response,
  type ParsedResponse,
  ResponseParser,
} from "./response-parser.js";
import { openSocket, TlsLoader, type TlsModule } from "./socket.js";

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
  readonly #tls = new TlsLoader();

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
    this.#withTls((tls) =>
      this.#connectFor((connection) => {
        if (connection === undefined || connection.gone) return;
        this.#busy.delete(connection);
        connection.socket.unref();
        this.#idle.push(connection);
      }, tls),
    );
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
    this.#withTls((tls) => this.#connectFor(deliver, tls));
  }

  /** Calls `then` with node:tls for an https origin (loaded on first use), else undefined. */
  #withTls(then: (tls: TlsModule | Error | undefined) => void): void {
    const tls = this.#origin.protocol === "https:" ? this.#tls.load() : undefined;
    if (tls instanceof Promise) tls.then(then, then);
    else then(tls);
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

  #connect(tls: TlsModule | undefined): Connection {
    const socket = openSocket({ host: this.#host, port: this.#port, ca: this.#ca }, tls);
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
