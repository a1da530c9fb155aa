import type { ClientRequest, IncomingMessage } from "node:http";
import type { Socket } from "node:net";
import { type StoreCallProgress, timeoutAfterPendingIo } from "../../core/deadline.js";
import { EdgelimitError } from "../../core/errors.js";
import { positiveMs } from "../../core/options.js";
import {
  DEFAULT_MAX_BODY_BYTES,
  describeFailure,
  type HttpResponse,
  MAX_HEAD_BYTES,
  readResponse,
} from "./http-answer.js";
import { createAgent, type HttpModule, type PoolAgent } from "./pool-agent.js";

export { DEFAULT_MAX_BODY_BYTES, type HttpResponse, MAX_HEAD_BYTES } from "./http-answer.js";

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

interface Loaded {
  readonly module: HttpModule;
  readonly agent: PoolAgent;
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
    this.#connectTimeoutMs = positiveMs(
      options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
      "dynamodb",
      "connectTimeoutMs",
    );
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
          readResponse(response, sent, this.#maxBodyBytes, settle);
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

function isAddress(host: string): boolean {
  return /^[\d.]+$/.test(host) || host.includes(":");
}
