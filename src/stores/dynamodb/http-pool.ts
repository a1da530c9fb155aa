import type { Agent, ClientRequest, IncomingMessage } from "node:http";
import type { Socket } from "node:net";
import { type StoreCallProgress, timeoutAfterPendingIo } from "../../core/deadline.js";
import { EdgelimitError } from "../../core/errors.js";

/** A response head (status line and header fields) larger than this is refused. */
export const MAX_HEAD_BYTES = 64 * 1024;
/** A response body larger than this is refused unless the pool is given another cap. */
export const DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024;

export interface HttpResponse {
  readonly status: number;
  /** Field names in lower case; a repeated field's values joined with ", ". */
  readonly headers: ReadonlyMap<string, string>;
  readonly body: Buffer;
}

export interface HttpPoolOptions {
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
  /**
   * How long a new socket may take from its creation to a finished handshake: DNS lookup, TCP
   * and TLS (default 1000 ms). A socket not ready by then is destroyed and its request fails:
   * an endpoint that accepts and never completes the handshake costs a call this long, never
   * more.
   */
  readonly connectTimeoutMs?: number | undefined;
}

const DEFAULT_CONNECT_TIMEOUT_MS = 1000;

type HttpModule = typeof import("node:http") | typeof import("node:https");

interface Loaded {
  readonly module: HttpModule;
  readonly agent: PoolAgent;
}

/** What the pool adds to an Agent: a socket opened ahead, and knowing when a handshake is done. */
interface PoolAgent extends Agent {
  /** Opens a socket for the next connection the Agent makes, unless one is waiting already. */
  preconnect(options: object): void;
  /** The socket `preconnect` opened, until a request takes it. */
  readonly preopened: Socket | undefined;
  /** The socket's TCP (and TLS) handshake is done. */
  isReady(socket: Socket): boolean;
}

const STALE_SOCKET_ERRORS = new Set(["ECONNRESET", "EPIPE", "ECONNABORTED"]);

/**
 * A keep-alive client for one origin: `node:https` (or `node:http` for a local endpoint) with
 * an `Agent` (at most `maxSockets` sockets, idle ones reused most recent first, unreferenced
 * while idle), loaded on first use. What the store needs beyond an Agent:
 *
 * - a new socket's TCP and TLS handshake is reported to `progress` (a decision budget does not
 *   run meanwhile), bounded by `connectTimeoutMs`, and the request timeout starts once the
 *   handshake is done;
 * - `preconnect()` opens a socket ahead of the first call, handed to the first request;
 * - timeouts read the replies already waiting before they fire (`timeoutAfterPendingIo`);
 * - one resend, on a fresh socket, of a request whose reused socket ended before a byte of
 *   the answer came back (the server closed the idle socket as we wrote to it): a DynamoDB
 *   `UpdateItem` sent twice can only count one too many, the safe direction. Nothing else is
 *   resent: not a fresh socket's failure, not a timeout, not a partial answer.
 * - an idle socket that receives bytes is destroyed: they answer nothing we asked, and must
 *   never be taken for the next request's answer (Node destroys a socket that carries a second
 *   response behind the first).
 */
export class HttpPool {
  readonly #origin: URL;
  readonly #secure: boolean;
  readonly #host: string;
  readonly #port: number;
  readonly #maxSockets: number;
  readonly #maxBodyBytes: number;
  readonly #ca: string | Buffer | undefined;
  readonly #connectTimeoutMs: number;
  /** Calls under way, failed by `close()`. */
  readonly #calls = new Set<() => void>();
  #loaded: Loaded | undefined;

  constructor(options: HttpPoolOptions) {
    this.#origin = options.origin;
    this.#secure = options.origin.protocol === "https:";
    if (!this.#secure && options.origin.protocol !== "http:") {
      throw new EdgelimitError("EL_STORE_URL", `unsupported endpoint ${options.origin.href}`);
    }
    this.#host = options.origin.hostname.replace(/^\[|\]$/g, "");
    this.#port = Number(options.origin.port || (this.#secure ? 443 : 80));
    this.#maxSockets = options.maxSockets ?? 64;
    this.#maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
    this.#ca = options.ca;
    const connectTimeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    if (!Number.isFinite(connectTimeoutMs) || connectTimeoutMs <= 0) {
      throw new EdgelimitError(
        "EL_STORE_OPTION",
        `connectTimeoutMs must be a positive number of milliseconds; got ${connectTimeoutMs}`,
      );
    }
    this.#connectTimeoutMs = connectTimeoutMs;
  }

  /** Sockets open now (idle and busy). */
  get openSockets(): number {
    const loaded = this.#loaded;
    if (loaded === undefined) return 0;
    let open = loaded.agent.preopened === undefined ? 0 : 1;
    for (const list of [loaded.agent.sockets, loaded.agent.freeSockets]) {
      for (const sockets of Object.values(list)) {
        // A destroyed socket leaves the Agent's lists on its `close` event, a tick later.
        for (const socket of sockets ?? []) if (!socket.destroyed) open++;
      }
    }
    return open;
  }

  /**
   * Sends `POST path` with the given fields and resolves to the whole response. Fails with
   * `EL_STORE_TIMEOUT` when no complete response arrived within `timeoutMs` of the request
   * going out on a connected socket (the socket is destroyed; time spent waiting for a free
   * socket is the caller's budget to bound, as with any Agent's queue), `EL_STORE_FAILED`
   * otherwise. `resendOnStaleSocket: false` is for requests that must not run twice even in
   * the rare case described on the class (a refund).
   */
  post(
    path: string,
    headers: Readonly<Record<string, string>>,
    body: string,
    timeoutMs: number,
    resendOnStaleSocket = true,
    progress?: StoreCallProgress,
  ): Promise<HttpResponse> {
    return new Promise<HttpResponse>((resolve, reject) => {
      let settled = false;
      let cancelTimer: (() => void) | undefined;
      // Ends the report of a connection setup to `progress` (set while one is under way).
      let setupDone: (() => void) | undefined;
      let request: ClientRequest | undefined;
      const endSetup = (): void => {
        setupDone?.();
        setupDone = undefined;
      };
      const settle = (error: Error | undefined, response?: HttpResponse): void => {
        if (settled) return;
        settled = true;
        this.#calls.delete(onClose);
        cancelTimer?.();
        endSetup();
        if (error === undefined) resolve(response as HttpResponse);
        else reject(error);
      };
      const onClose = (): void => {
        const reason = request?.socket ? "connection closed" : "client closed";
        settle(new EdgelimitError("EL_STORE_FAILED", reason));
        request?.destroy();
      };
      this.#calls.add(onClose);
      const startClock = (): void => {
        cancelTimer?.();
        cancelTimer = timeoutAfterPendingIo(
          timeoutMs,
          () => settled,
          () => {
            settle(
              new EdgelimitError("EL_STORE_TIMEOUT", `no complete answer within ${timeoutMs} ms`),
            );
            request?.destroy();
          },
        );
      };
      const attempt = (loaded: Loaded, mayRetry: boolean): void => {
        let answered = false;
        // Bytes the socket had read before this request: any more are (part of) its answer.
        let readBefore = 0;
        try {
          request = loaded.module.request({
            agent: loaded.agent,
            host: this.#host,
            port: this.#port,
            method: "POST",
            path,
            headers,
            maxHeaderSize: MAX_HEAD_BYTES,
          });
        } catch (error) {
          // A bad TLS option (an unreadable `ca`) throws before any socket exists.
          settle(new EdgelimitError("EL_STORE_FAILED", (error as Error).message));
          return;
        }
        const sent = request;
        sent.on("socket", (socket: Socket) => {
          readBefore = socket.bytesRead;
          if (loaded.agent.isReady(socket)) {
            endSetup();
            startClock();
            return;
          }
          setupDone ??= progress?.connecting();
          // The handshake has its own bound; the answer's time runs from its end.
          cancelTimer?.();
          cancelTimer = timeoutAfterPendingIo(
            this.#connectTimeoutMs,
            () => settled || loaded.agent.isReady(socket),
            () => {
              settle(
                new EdgelimitError(
                  "EL_STORE_FAILED",
                  `no connection to ${this.#origin.host} ready within ${this.#connectTimeoutMs} ms`,
                ),
              );
              sent.destroy();
            },
          );
          socket.once(this.#secure ? "secureConnect" : "connect", () => {
            endSetup();
            if (!settled) startClock();
          });
        });
        sent.on("response", (response: IncomingMessage) => {
          answered = true;
          this.#read(response, sent, settle);
        });
        sent.on("error", (error: NodeJS.ErrnoException) => {
          if (settled) return;
          const received = answered || (sent.socket?.bytesRead ?? 0) > readBefore;
          const stale = sent.reusedSocket && !received && STALE_SOCKET_ERRORS.has(error.code ?? "");
          if (mayRetry && stale) attempt(loaded, false);
          else settle(describeFailure(error, received));
        });
        sent.end(body);
      };
      attempt(this.#load(), resendOnStaleSocket);
    });
  }

  #read(
    response: IncomingMessage,
    request: ClientRequest,
    settle: (error: Error | undefined, response?: HttpResponse) => void,
  ): void {
    const chunks: Buffer[] = [];
    let bytes = Number(response.headers["content-length"] ?? 0);
    const tooLarge = (): boolean => {
      if (bytes <= this.#maxBodyBytes) return false;
      const reason = `malformed HTTP response: body over ${this.#maxBodyBytes} bytes`;
      settle(new EdgelimitError("EL_STORE_FAILED", reason));
      request.destroy();
      return true;
    };
    if (tooLarge()) return;
    bytes = 0;
    response.on("data", (chunk: Buffer) => {
      bytes += chunk.length;
      if (!tooLarge()) chunks.push(chunk);
    });
    response.on("end", () => {
      const fields = new Map<string, string>();
      for (const [name, value] of Object.entries(response.headers)) {
        if (value !== undefined) fields.set(name, Array.isArray(value) ? value.join(", ") : value);
      }
      settle(undefined, {
        status: response.statusCode ?? 0,
        headers: fields,
        body: chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks),
      });
    });
    response.on("aborted", () => settle(describeFailure(new Error("aborted"), true)));
    response.on("error", (error) => settle(describeFailure(error, true)));
  }

  /**
   * Opens a socket now, when none is open, so that the first request finds its handshake done
   * (a Lambda@Edge function calls it while its module initialises). Failures are left to the
   * first request, which opens a socket of its own.
   */
  preconnect(): void {
    if (this.openSockets > 0) return;
    try {
      this.#load().agent.preconnect({
        host: this.#host,
        port: this.#port,
        ...(this.#secure && !isAddress(this.#host) ? { servername: this.#host } : {}),
        ...(this.#ca !== undefined ? { ca: this.#ca } : {}),
      });
    } catch {
      // A bad TLS option: the first request reports it.
    }
  }

  /** Destroys every socket; requests in flight fail. The pool stays usable, like an Agent. */
  close(): void {
    for (const fail of [...this.#calls]) fail();
    const loaded = this.#loaded;
    if (loaded !== undefined) loaded.agent.destroy();
  }

  /**
   * node:https (which brings node:tls) or node:http, loaded by the first use only. Through
   * `process.getBuiltinModule`, not `import()`: in a CommonJS bundle made with esbuild's
   * defaults (an application's own Lambda bundle; `edgelimit build` turns `import()` into
   * `require` itself) a dynamic import starts Node's ES module loader on a fresh process's first
   * call. bench/lambda-edge.bench.ts bundles its "floor: HttpPool UpdateItem" row so, and shows
   * the difference (docs/benchmarks.md, "Lambda@Edge bundle and cold start").
   */
  #load(): Loaded {
    if (this.#loaded === undefined) {
      const module: HttpModule = this.#secure
        ? process.getBuiltinModule("node:https")
        : process.getBuiltinModule("node:http");
      const agent = createAgent(module, this.#secure, this.#maxSockets, this.#ca);
      this.#loaded = { module, agent };
    }
    return this.#loaded;
  }
}

function createAgent(
  module: HttpModule,
  secure: boolean,
  maxSockets: number,
  ca: string | Buffer | undefined,
): PoolAgent {
  const ready = new WeakSet<Socket>();
  const watch = (socket: Socket, secure: boolean): Socket => {
    socket.setNoDelay(true);
    socket.once(secure ? "secureConnect" : "connect", () => ready.add(socket));
    return socket;
  };
  const onIdleData = function (this: Socket): void {
    this.destroy();
  };
  // https.Agent extends http.Agent: the methods overridden here are http.Agent's.
  const Base = module.Agent as typeof import("node:http").Agent;
  class StoreAgent extends Base implements PoolAgent {
    #opened: Socket | undefined;

    get preopened(): Socket | undefined {
      return this.#opened?.destroyed === false ? this.#opened : undefined;
    }

    preconnect(options: object): void {
      if (this.preopened !== undefined) return;
      const socket = super.createConnection(options as never) as Socket;
      watch(socket, secure);
      socket.on("error", () => {
        if (this.#opened === socket) this.#opened = undefined;
      });
      // Like an idle socket of the Agent, it does not keep the process alive.
      socket.unref();
      this.#opened = socket;
    }

    isReady(socket: Socket): boolean {
      return ready.has(socket);
    }

    override createConnection(...args: Parameters<Agent["createConnection"]>) {
      const opened = this.#opened;
      this.#opened = undefined;
      if (opened !== undefined && !opened.destroyed) return opened.ref();
      const socket = super.createConnection(...args);
      return socket === undefined || socket === null ? socket : watch(socket as Socket, secure);
    }

    override keepSocketAlive(socket: Socket): boolean {
      // Typed void in @types/node; Node returns whether the socket may be kept.
      const kept = super.keepSocketAlive(socket) as unknown as boolean;
      if (kept) socket.once("data", onIdleData);
      return kept;
    }

    override reuseSocket(socket: Socket, request: ClientRequest): void {
      socket.off("data", onIdleData);
      super.reuseSocket(socket, request);
    }
  }
  return new StoreAgent({
    keepAlive: true,
    maxSockets,
    scheduling: "lifo",
    ...(ca !== undefined ? { ca } : {}),
  });
}

/** An error from node:http, as the store reports it (`received`: any byte of the answer). */
function describeFailure(error: NodeJS.ErrnoException, received: boolean): EdgelimitError {
  const code = error.code ?? "";
  if (
    code === "HPE_INVALID_EOF_STATE" ||
    (received && (code === "ECONNRESET" || error.message === "aborted"))
  ) {
    return new EdgelimitError("EL_STORE_FAILED", "connection closed in the middle of a response");
  }
  if (code === "HPE_HEADER_OVERFLOW") {
    return new EdgelimitError(
      "EL_STORE_FAILED",
      `malformed HTTP response: header section over ${MAX_HEAD_BYTES} bytes`,
    );
  }
  if (code.startsWith("HPE_")) {
    return new EdgelimitError("EL_STORE_FAILED", `malformed HTTP response: ${error.message}`);
  }
  if (code === "ECONNRESET") {
    return new EdgelimitError("EL_STORE_FAILED", "connection closed before any answer");
  }
  return new EdgelimitError("EL_STORE_FAILED", error.message);
}

function isAddress(host: string): boolean {
  return /^[\d.]+$/.test(host) || host.includes(":");
}
