/**
 * Node's request and response for the guard, shared by the middleware (`edgelimit/node`) and
 * the gateway: a request read into the core's description, the challenge page's Web `Request`
 * and `Response`, a refusal written out.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { RequestDescription } from "../core/types.js";
import {
  Guard,
  type GuardLimiter,
  type GuardOptions,
  type GuardTranslation,
} from "../http/guard.js";
import type { Verdict } from "../http/respond.js";
import { toWebRequest } from "../node-http/web.js";

// Node's request and response as Web ones live below the adapters, shared with the servers.
export { toWebRequest, writeWebResponse } from "../node-http/web.js";

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

/** Sets headers on a Node response. */
export function setResponseHeaders(
  response: ServerResponse,
  headers: Readonly<Record<string, string>>,
): void {
  for (const name in headers) response.setHeader(name, headers[name] as string);
}
