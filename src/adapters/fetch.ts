/**
 * `edgelimit/fetch`: the limiter for Web-standard runtimes (Hono, Next.js middleware, Deno,
 * Bun, Workers without the native binding). It translates a `Request` into the core's request
 * description and a verdict into a `Response`; nothing else.
 */

import { routeChallenge } from "../challenge/route.js";
import { EdgelimitError } from "../core/errors.js";
import { parseIp } from "../core/ip.js";
import type { ChallengeHandler, RequestDescription } from "../core/types.js";
import type { Verdict } from "../http/respond.js";
import type { Limiter } from "../limiter.js";
import { RateLimitedWarning } from "../warnings.js";
import { refuseUnallowedUser, validCost } from "./options.js";

export interface FetchRateLimitOptions<Context = unknown> {
  readonly limiter: Limiter;
  /**
   * The peer address as the runtime reports it (Deno: `info.remoteAddr.hostname`, Bun:
   * `server.requestIP(request)?.address`). Headers are not a source of identity here: the
   * policy says which header, if any, to believe (`identity.ip`). Required by `withRateLimit`
   * when the policy reads the peer (`identity.ip.source` `socket` or `x-forwarded-for`). When it
   * gives no IP address, the request is counted as `ip:unknown`, one counter shared by every
   * such request, and a warning says so (at most once a minute).
   */
  readonly ip?: (request: Request, context: Context) => string | undefined;
  /** Serves the challenge page under its path when the policy challenges. */
  readonly challenge?: ChallengeHandler;
  /** Requests for which this returns true pass uncounted, with no rate-limit headers. */
  readonly skip?: (request: Request, context: Context) => boolean | Promise<boolean>;
  /** Units this request costs (default: each rule's `cost`, 1 unless the policy says). */
  readonly cost?: (request: Request, context: Context) => number | undefined;
  /**
   * The user your application has verified for this request (its session). The policy must
   * allow it (`identity.user.application: true`); see `NodeRateLimitOptions.user`.
   */
  readonly user?: (
    request: Request,
    context: Context,
  ) => { readonly id: string; readonly plan?: string | undefined } | undefined;
  /**
   * The answer to a refused request instead of `refusalResponse(verdict)` (429 with a JSON body,
   * 302 to the challenge, 503 when failing closed); the verdict's `headers` are added to it.
   */
  readonly onRefused?: (request: Request, verdict: Verdict) => Response | Promise<Response>;
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
 *
 * A Web `Request` carries no peer address, so a policy that counts clients by it needs `ip`:
 * without it every client would share the one counter `ip:unknown`, and one client would
 * exhaust the limit for all. That is refused here, when the handler is built.
 */
export function withRateLimit<Context = unknown>(
  handler: (
    request: Request,
    context: Context,
    verdict: Verdict | undefined,
  ) => Response | Promise<Response>,
  options: FetchRateLimitOptions<Context>,
): (request: Request, context: Context) => Promise<Response> {
  const { limiter, challenge } = options;
  const source = limiter.policy.identity.ip.source;
  if (options.ip === undefined && readsPeer(limiter)) {
    throw new EdgelimitError(
      "EL_BAD_ARGUMENT",
      `withRateLimit needs the ip option: the policy counts clients by their address (identity.ip.source: ${source}) and a Request does not carry it, so every client would share one counter. Pass the peer address as the runtime reports it, for example Deno: withRateLimit(handler, { limiter, ip: (req, info) => info.remoteAddr.hostname }); Bun: ip: (req, server) => server.requestIP(req)?.address. Behind a platform that sets a client header (Cloudflare's cf-connecting-ip), use identity.ip.source: header instead.`,
    );
  }
  refuseUnallowedUser("withRateLimit", limiter, options.user !== undefined);
  const checkPeer = peerChecker("withRateLimit", limiter);
  return async (request, context) => {
    if (options.skip !== undefined && (await options.skip(request, context))) {
      return handler(request, context, undefined);
    }
    const ip = checkPeer(options.ip?.(request, context));
    const cost = options.cost?.(request, context);
    const user = options.user?.(request, context);
    const description = {
      ...describeRequest(request, ip),
      ...(cost === undefined ? {} : { cost: validCost("withRateLimit", cost) }),
      ...(user === undefined ? {} : { user }),
    };
    const page = routeChallenge(challenge, limiter, description, () => request);
    if (page !== undefined) return page;
    const verdict = await limiter.check(description);
    if (verdict.action !== "allow") {
      if (options.onRefused === undefined) return refusalResponse(verdict);
      return withVerdictHeaders(await options.onRefused(request, verdict), verdict);
    }
    const response = await handler(forwardRequest(request, limiter, verdict), context, verdict);
    return withVerdictHeaders(response, verdict);
  };
}

/** `socket` and `x-forwarded-for` (believed only from a trusted peer) need the peer; `header` not. */
function readsPeer(limiter: Limiter): boolean {
  return limiter.policy.identity.ip.source !== "header";
}

const PEER_WARNING_INTERVAL_MS = 60_000;

/**
 * Passes the peer address through, and warns when the policy needs one and it is not an IP
 * address: an `ip` option that returns the wrong thing is a programming error, but refusing
 * the request would turn it into an outage. Such requests are counted as `ip:unknown`, which
 * errs towards limiting (they share one counter), and the warning, at most once a minute per
 * wrapper, says how many there were.
 */
function peerChecker(name: string, limiter: Limiter): (ip: unknown) => string | undefined {
  let last: unknown;
  const warning = new RateLimitedWarning((line, suppressed) => {
    const count = suppressed + 1;
    console.warn(
      `${line}; ${count} request${count === 1 ? "" : "s"} since the last warning counted together as ip:unknown (one counter for all of them). Make the ip option return the peer address, such as "203.0.113.7".`,
    );
  }, PEER_WARNING_INTERVAL_MS);
  return (ip) => {
    if (typeof ip === "string" && parseIp(ip) !== undefined) return ip;
    if (!readsPeer(limiter)) return typeof ip === "string" ? ip : undefined;
    last = ip;
    warning.warn(
      `edgelimit ${name}: the client address is ${JSON.stringify(last) ?? "undefined"}, not an IP address`,
    );
    return undefined;
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
 * address is read from `c.env.incoming`; elsewhere pass `ip`. Whether the runtime is Node is
 * known only per request, so a missing address is warned about then (see `ip`), not refused.
 */
export function honoRateLimit(options: FetchRateLimitOptions<HonoLikeContext>) {
  const { limiter, challenge } = options;
  const checkPeer = peerChecker("honoRateLimit", limiter);
  return async (c: HonoLikeContext, next: () => Promise<void>): Promise<Response | undefined> => {
    const ip = checkPeer(options.ip?.(c.req.raw, c) ?? nodePeerOf(c.env));
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
