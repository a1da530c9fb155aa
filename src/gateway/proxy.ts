import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http";
import { type Dispatcher, Pool } from "undici";
import { EdgelimitError } from "../core/errors.js";
import type { ForwardHeaders } from "../http/guard.js";

/**
 * Headers that describe one connection, not the message (RFC 9110 section 7.6.1), plus
 * `expect`, which the proxy answers itself. They are never forwarded in either direction.
 */
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "proxy-authorization",
  "proxy-connection",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "expect",
]);

export type UpstreamFailure = "connect" | "timeout" | "reset";

export interface UpstreamProxyOptions {
  /** Keep-alive connections held open to the upstream (default 128). */
  readonly connections?: number;
  /** Longest wait for the upstream's response headers, then 504 (default 30 s). */
  readonly timeoutMs?: number;
}

/**
 * Forwards requests to one upstream over a pool of keep-alive connections (undici), streaming
 * bodies both ways: neither a large upload nor a large download is ever held in memory.
 */
export class UpstreamProxy {
  readonly origin: string;
  readonly #basePath: string;
  readonly #pool: Pool;

  constructor(upstream: string, options: UpstreamProxyOptions = {}) {
    let url: URL;
    try {
      url = new URL(upstream);
    } catch {
      throw new EdgelimitError(
        "EL_CLI_ARGUMENT",
        `--upstream must be a URL such as http://127.0.0.1:3000; got "${upstream}"`,
      );
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      throw new EdgelimitError(
        "EL_CLI_ARGUMENT",
        `--upstream must be http:// or https://; got "${upstream}"`,
      );
    }
    this.origin = url.origin;
    this.#basePath = url.pathname === "/" ? "" : url.pathname.replace(/\/$/, "");
    const timeoutMs = options.timeoutMs ?? 30_000;
    this.#pool = new Pool(url.origin, {
      connections: options.connections ?? 128,
      keepAliveTimeout: 30_000,
      headersTimeout: timeoutMs,
      // Streamed responses may pause between chunks for as long as the origin likes to send them.
      bodyTimeout: 0,
    });
  }

  /**
   * Sends `req` upstream and streams the answer into `res`. The request carries the guard's
   * `origin` headers in place of any the client sent under their names (and never a client's
   * `origin.remove`); `clientHeaders` are added to the response. Resolves
   * once the exchange is over; never rejects: an upstream that fails before answering gets a
   * 502 (504 on timeout), one that fails mid-body has the client connection cut.
   */
  forward(
    req: IncomingMessage,
    res: ServerResponse,
    origin: ForwardHeaders,
    clientHeaders: Readonly<Record<string, string>>,
    onFailure: (kind: UpstreamFailure, error: unknown) => void,
  ): Promise<void> {
    const hasBody =
      req.headers["transfer-encoding"] !== undefined ||
      (req.headers["content-length"] !== undefined && req.headers["content-length"] !== "0");
    return new Promise<void>((resolve) => {
      // A dispatch handler rather than `pool.stream`: undici hands it a controller to abort
      // with, so no AbortController and signal listeners are built per request.
      this.#pool.dispatch(
        {
          path: this.#basePath + (req.url ?? "/"),
          method: (req.method ?? "GET") as Dispatcher.HttpMethod,
          headers: requestHeaders(req, origin.set, origin.remove),
          body: hasBody ? req : null,
        },
        new Exchange(res, clientHeaders, onFailure, resolve),
      );
    });
  }

  close(): Promise<void> {
    return this.#pool.close();
  }

  destroy(): Promise<void> {
    return this.#pool.destroy();
  }
}

/**
 * One request's answer from the upstream, written into the client's response as it arrives,
 * with the client's pace as back-pressure. A client that goes away aborts the upstream
 * request; an upstream that fails is answered 502/504 (or the client connection is cut once
 * the status line is out).
 */
class Exchange implements Dispatcher.DispatchHandler {
  readonly #res: ServerResponse;
  readonly #clientHeaders: Readonly<Record<string, string>>;
  readonly #onFailure: (kind: UpstreamFailure, error: unknown) => void;
  readonly #done: () => void;
  #controller: Dispatcher.DispatchController | undefined;
  #clientGone = false;
  #finished = false;

  constructor(
    res: ServerResponse,
    clientHeaders: Readonly<Record<string, string>>,
    onFailure: (kind: UpstreamFailure, error: unknown) => void,
    done: () => void,
  ) {
    this.#res = res;
    this.#clientHeaders = clientHeaders;
    this.#onFailure = onFailure;
    this.#done = done;
    res.once("close", this.#onClientClose);
  }

  readonly #onClientClose = (): void => {
    if (this.#res.writableFinished) return;
    this.#clientGone = true;
    // Before the request reached a connection there is no controller yet: onRequestStart aborts.
    this.#controller?.abort(new Error("client closed the connection"));
  };

  readonly #onDrain = (): void => {
    this.#controller?.resume();
  };

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller;
    if (this.#clientGone) controller.abort(new Error("client closed the connection"));
  }

  onResponseStart(
    _controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
  ): void {
    this.#res.writeHead(statusCode, responseHeaders(headers, this.#clientHeaders));
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (!this.#res.write(chunk)) {
      controller.pause();
      this.#res.once("drain", this.#onDrain);
    }
  }

  onResponseEnd(): void {
    this.#res.end();
    this.#finish();
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    const res = this.#res;
    if (this.#clientGone) {
      this.#finish();
      return;
    }
    const kind = failureKind(error);
    this.#onFailure(kind, error);
    if (res.headersSent) {
      res.destroy();
      this.#finish();
      return;
    }
    const status = kind === "timeout" ? 504 : 502;
    const body = JSON.stringify({
      error: kind === "timeout" ? "upstream_timeout" : "bad_gateway",
      message:
        kind === "timeout"
          ? "The upstream server did not answer in time."
          : "The upstream server could not be reached or failed to answer.",
    });
    res.writeHead(status, {
      "content-type": "application/json; charset=utf-8",
      "cache-control": "no-store",
      "content-length": Buffer.byteLength(body),
    });
    res.end(body);
    this.#finish();
  }

  #finish(): void {
    if (this.#finished) return;
    this.#finished = true;
    this.#res.off("close", this.#onClientClose);
    this.#done();
  }
}

function connectionTokens(value: string | string[] | undefined): Set<string> | undefined {
  // The usual value names only `keep-alive`, which is stripped anyway: no split, no set.
  if (value === undefined || value === "keep-alive" || value === "Keep-Alive") return undefined;
  const text = Array.isArray(value) ? value.join(",") : value;
  const tokens = new Set<string>();
  for (const token of text.split(",")) {
    const name = token.trim().toLowerCase();
    if (name !== "") tokens.add(name);
  }
  return tokens;
}

/**
 * The forwarded request's headers as undici's flat list (`[name, value, name, value, ...]`):
 * hop-by-hop removed, ours (`originHeaders`) in place of any the client sent under the same
 * name, X-Forwarded-For appended. A list spares undici the object's iterator check, its key
 * list and a lookup per name, and us an object grown one header at a time.
 */
export function requestHeaders(
  req: IncomingMessage,
  originHeaders: Readonly<Record<string, string>>,
  strippedHeader?: string,
): string[] {
  const listed = connectionTokens(req.headers.connection);
  const out: string[] = [];
  const incoming: IncomingHttpHeaders = req.headers;
  let prior: string | undefined;
  for (const name in incoming) {
    const value = incoming[name];
    if (value === undefined || HOP_BY_HOP.has(name) || listed?.has(name)) continue;
    if (name === strippedHeader) continue;
    if (name === "x-forwarded-for") {
      prior = typeof value === "string" ? value : value.join(", ");
      continue;
    }
    // Node lists only a repeated `set-cookie` as an array: one line each, as it arrived.
    if (typeof value === "string") out.push(name, value);
    else for (const item of value) out.push(name, item);
  }
  // A client must not be able to pretend it has quota left: our value replaces theirs. The
  // limiter writes these names in lower case, as Node's own names are, and the usual one is
  // `strippedHeader`, already left out above.
  for (const name in originHeaders) {
    if (name !== strippedHeader) removeHeader(out, name);
    out.push(name, originHeaders[name] as string);
  }
  const peer = plainAddress(req.socket.remoteAddress);
  if (peer !== undefined) {
    out.push("x-forwarded-for", prior === undefined || prior === "" ? peer : `${prior}, ${peer}`);
  } else if (prior !== undefined) {
    out.push("x-forwarded-for", prior);
  }
  return out;
}

/** Removes every line named `name` (lower case) from a flat header list. */
function removeHeader(list: string[], name: string): void {
  for (let i = list.length - 2; i >= 0; i -= 2) if (list[i] === name) list.splice(i, 2);
}

/**
 * The client's response headers as Node's flat list (`[name, value, name, value, ...]`):
 * hop-by-hop removed, and ours (`clientHeaders`) in place of any the upstream sent under the
 * same name. A list spares Node the object walk and own-property check per header, and us an
 * object grown one header at a time.
 */
function responseHeaders(
  upstream: IncomingHttpHeaders,
  clientHeaders: Readonly<Record<string, string>>,
): (string | string[])[] {
  const listed = connectionTokens(upstream.connection);
  const out: (string | string[])[] = [];
  for (const name in upstream) {
    const value = upstream[name];
    if (value === undefined || HOP_BY_HOP.has(name) || listed?.has(name)) continue;
    if (Object.hasOwn(clientHeaders, name)) continue;
    out.push(name, value);
  }
  for (const name in clientHeaders) out.push(name, clientHeaders[name] as string);
  return out;
}

/** `::ffff:127.0.0.1` is written as the IPv4 address it is. */
export function plainAddress(address: string | undefined): string | undefined {
  if (address === undefined) return undefined;
  return address.startsWith("::ffff:") && address.includes(".") ? address.slice(7) : address;
}

function failureKind(error: unknown): UpstreamFailure {
  const code = (error as { code?: string } | undefined)?.code;
  if (code === "UND_ERR_HEADERS_TIMEOUT" || code === "UND_ERR_CONNECT_TIMEOUT") return "timeout";
  if (
    code === "ECONNREFUSED" ||
    code === "ENOTFOUND" ||
    code === "EHOSTUNREACH" ||
    code === "EAI_AGAIN"
  ) {
    return "connect";
  }
  return "reset";
}
