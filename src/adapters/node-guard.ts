/**
 * Node's request and response for the guard, shared by the middleware (`edgelimit/node`) and
 * the gateway: a request read into the core's description, the challenge page's Web `Request`
 * and `Response`, a refusal written out.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { Readable } from "node:stream";
import type { RequestDescription } from "../core/types.js";
import {
  Guard,
  type GuardLimiter,
  type GuardOptions,
  type GuardTranslation,
} from "../http/guard.js";
import type { Verdict } from "../http/respond.js";

/**
 * Writes the answer to a refused request instead of the default; the verdict's `headers`
 * (`Retry-After`, `RateLimit`, ...) are set on the response before it is called.
 */
export type NodeOnRefused = (
  request: IncomingMessage,
  response: ServerResponse,
  verdict: Verdict,
) => void | Promise<void>;

/** Every adapter's options (see `GuardOptions`) as functions of Node's request. */
export type NodeGuardOptions = GuardOptions<[request: IncomingMessage], NodeOnRefused>;

/** A request after the middleware: the verdict, as Express users know from `req.rateLimit`. */
export interface RateLimitedRequest extends IncomingMessage {
  rateLimit?: Verdict;
}

/**
 * Describes a Node request for the core. The address is the socket peer's, never a header (a
 * Unix socket has none: the request is then counted as `ip:unknown`); Node writes every header
 * name in lower case. How the framework routes letter case is `caseSensitiveRouting`'s to say
 * (by default, Express's setting on an Express request, else unknown).
 */
export function describeNodeRequest(
  request: IncomingMessage,
  caseSensitiveRouting: CaseSensitiveRouting = expressCaseSensitivity,
): RequestDescription {
  const url = (request as IncomingMessage & { originalUrl?: string }).originalUrl ?? request.url;
  return {
    ip: request.socket.remoteAddress,
    method: request.method,
    path: url ?? "/",
    caseSensitiveRouting: caseSensitiveRouting(request),
    headers: request.headers,
    lowerCaseHeaders: true,
  };
}

/** Whether the framework serving a request routes letter case exactly; undefined: not known. */
export type CaseSensitiveRouting = (request: IncomingMessage) => boolean | undefined;

/**
 * Express routes case-insensitively unless the app enables `case sensitive routing`; Express
 * sets `req.app` on its requests. A plain `node:http` request says nothing.
 */
export function expressCaseSensitivity(request: IncomingMessage): boolean | undefined {
  const app = (request as IncomingMessage & { app?: { get?: (name: string) => unknown } }).app;
  if (typeof app?.get !== "function") return undefined;
  return Boolean(app.get("case sensitive routing"));
}

/** Writes a refused verdict (429, 302, 503, 403) as the response. */
export function sendRefusal(response: ServerResponse, verdict: Verdict): void {
  response.writeHead(verdict.status, verdict.headers);
  response.end(verdict.body);
}

/**
 * How the guard reads Node's request, the response being its context: `onRefused` writes to
 * the response, with the verdict's headers set first and the verdict on `request.rateLimit`.
 */
function nodeRequests(
  caseSensitiveRouting: CaseSensitiveRouting | undefined,
): GuardTranslation<IncomingMessage, ServerResponse, NodeOnRefused, void> {
  return {
    describe: (request) => describeNodeRequest(request, caseSensitiveRouting),
    webRequest: toWebRequest,
    refused(onRefused, request, response, verdict) {
      (request as RateLimitedRequest).rateLimit = verdict;
      setResponseHeaders(response, verdict.headers);
      return onRefused(request, response, verdict);
    },
  };
}

/** The guard on Node's request and response, for the middleware and the gateway. */
export type NodeGuard = Guard<IncomingMessage, ServerResponse, NodeOnRefused, void>;

/** `caseSensitiveRouting`: how the framework routes letter case (default: Express's setting). */
export function nodeGuard(
  name: string,
  limiter: GuardLimiter,
  options: NodeGuardOptions,
  caseSensitiveRouting?: CaseSensitiveRouting,
): NodeGuard {
  return new Guard(name, limiter, options, nodeRequests(caseSensitiveRouting));
}

/** A Web `Request` for a Node request (used to mount Web-standard handlers such as the challenge). */
export function toWebRequest(request: IncomingMessage): Request {
  let url: URL;
  try {
    url = new URL(request.url ?? "/", `http://${request.headers.host ?? "localhost"}`);
  } catch {
    // A Host header that is not a host name must not break the page.
    url = new URL(request.url ?? "/", "http://localhost");
  }
  const headers = new Headers();
  for (const [name, value] of Object.entries(request.headers)) {
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const item of value) headers.append(name, item);
    else headers.set(name, value);
  }
  const method = request.method ?? "GET";
  const hasBody = method !== "GET" && method !== "HEAD";
  return new Request(url, {
    method,
    headers,
    body: hasBody ? (Readable.toWeb(request) as ReadableStream<Uint8Array>) : undefined,
    // Required by undici when the body is a stream.
    ...(hasBody ? { duplex: "half" } : {}),
  } as RequestInit);
}

/** Writes a Web `Response` to a Node response, streaming its body. */
export async function writeWebResponse(response: ServerResponse, answer: Response): Promise<void> {
  const headers: Record<string, string | string[]> = {};
  answer.headers.forEach((value, name) => {
    if (name === "set-cookie") return;
    headers[name] = value;
  });
  const cookies = answer.headers.getSetCookie();
  if (cookies.length > 0) headers["set-cookie"] = cookies;
  response.writeHead(answer.status, headers);
  if (answer.body === null) {
    response.end();
    return;
  }
  const reader = answer.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (!response.write(value)) await new Promise((resolve) => response.once("drain", resolve));
  }
  response.end();
}

/** Sets headers on a Node response. */
export function setResponseHeaders(
  response: ServerResponse,
  headers: Readonly<Record<string, string>>,
): void {
  for (const name in headers) response.setHeader(name, headers[name] as string);
}
