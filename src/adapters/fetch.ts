/**
 * `edgelimit/fetch`: the limiter for Web-standard runtimes (Hono, Next.js middleware, Deno,
 * Bun, Workers without the native binding). It translates a `Request` into the core's request
 * description and a verdict into a `Response`; nothing else.
 */

import { routeChallenge } from "../challenge/route.js";
import type { ChallengeHandler, RequestDescription } from "../core/types.js";
import type { Verdict } from "../http/respond.js";
import type { Limiter } from "../limiter.js";

export interface FetchRateLimitOptions<Context = unknown> {
  readonly limiter: Limiter;
  /**
   * The peer address as the runtime reports it (Deno: `info.remoteAddr.hostname`, Bun:
   * `server.requestIP(request)?.address`). Headers are not a source of identity here: the
   * policy says which header, if any, to believe (`identity.ip`).
   */
  readonly ip?: (request: Request, context: Context) => string | undefined;
  /** Serves the challenge page under its path when the policy challenges. */
  readonly challenge?: ChallengeHandler;
}

/** Describes a Web `Request` for the core. */
export function describeRequest(request: Request, ip: string | undefined): RequestDescription {
  const url = new URL(request.url);
  return { ip, method: request.method, path: url.pathname + url.search, headers: request.headers };
}

/** The response for a refused verdict (429, 302, 503 or 403). */
export function refusalResponse(verdict: Verdict): Response {
  return new Response(verdict.body ?? null, { status: verdict.status, headers: verdict.headers });
}

/**
 * The request to pass on: the origin headers set, and any value the client sent under the same
 * names removed first, so an origin never reads a forged remaining count.
 */
export function forwardRequest(request: Request, limiter: Limiter, verdict: Verdict): Request {
  const originHeader = limiter.policy.headers.origin;
  const hasOriginHeaders = Object.keys(verdict.originHeaders).length > 0;
  if (!hasOriginHeaders && !request.headers.has(originHeader)) return request;
  const headers = new Headers(request.headers);
  headers.delete(originHeader);
  for (const [name, value] of Object.entries(verdict.originHeaders)) headers.set(name, value);
  return new Request(request, { headers });
}

/** Adds the verdict's rate-limit headers to a response (copying it if its headers are immutable). */
export function withVerdictHeaders(response: Response, verdict: Verdict): Response {
  const entries = Object.entries(verdict.headers);
  if (entries.length === 0) return response;
  try {
    for (const [name, value] of entries) response.headers.set(name, value);
    return response;
  } catch {
    const copy = new Response(response.body, response);
    for (const [name, value] of entries) copy.headers.set(name, value);
    return copy;
  }
}

/**
 * Wraps a fetch handler (`Deno.serve(handler)`, `Bun.serve({ fetch })`, a Worker's `fetch`):
 * refused requests are answered here; allowed ones reach the handler with the remaining count
 * in a request header, and the client gets the rate-limit headers on the response.
 */
export function withRateLimit<Context = unknown>(
  handler: (request: Request, context: Context) => Response | Promise<Response>,
  options: FetchRateLimitOptions<Context>,
): (request: Request, context: Context) => Promise<Response> {
  const { limiter, challenge } = options;
  return async (request, context) => {
    const ip = options.ip?.(request, context);
    const description = describeRequest(request, ip);
    const page = routeChallenge(challenge, limiter, description, () => request);
    if (page !== undefined) return page;
    const verdict = await limiter.check(description);
    if (verdict.action !== "allow") return refusalResponse(verdict);
    const response = await handler(forwardRequest(request, limiter, verdict), context);
    return withVerdictHeaders(response, verdict);
  };
}

/** Minimal shape of a Hono context, so this module does not depend on Hono. */
interface HonoLikeContext {
  readonly req: { readonly raw: Request };
  readonly env?: unknown;
  header(name: string, value: string): void;
}

/**
 * Hono middleware: `app.use(honoRateLimit({ limiter }))`. On Node (@hono/node-server) the peer
 * address is read from `c.env.incoming`; elsewhere pass `ip`.
 */
export function honoRateLimit(options: FetchRateLimitOptions<HonoLikeContext>) {
  const { limiter, challenge } = options;
  return async (c: HonoLikeContext, next: () => Promise<void>): Promise<Response | undefined> => {
    const ip = options.ip?.(c.req.raw, c) ?? nodePeerOf(c.env);
    const description = describeRequest(c.req.raw, ip);
    const page = routeChallenge(challenge, limiter, description, () => c.req.raw);
    if (page !== undefined) return page;
    const verdict = await limiter.check(description);
    if (verdict.action !== "allow") return refusalResponse(verdict);
    const originHeader = limiter.policy.headers.origin;
    // Hono reads headers from the raw request; make the forwarded values visible to handlers.
    const raw = c.req.raw;
    try {
      raw.headers.delete(originHeader);
      for (const [name, value] of Object.entries(verdict.originHeaders))
        raw.headers.set(name, value);
    } catch {
      // Immutable headers (some runtimes): the origin header is informational only.
    }
    await next();
    for (const [name, value] of Object.entries(verdict.headers)) c.header(name, value);
    return undefined;
  };
}

function nodePeerOf(env: unknown): string | undefined {
  const incoming = (env as { incoming?: { socket?: { remoteAddress?: string } } } | undefined)
    ?.incoming;
  return incoming?.socket?.remoteAddress;
}
