/**
 * `edgelimit/fetch`: the limiter for Web-standard runtimes (Hono, Next.js middleware, Deno,
 * Bun, Workers without the native binding). It translates a `Request` into the core's request
 * description and a verdict into a `Response`; nothing else.
 */

import { EdgelimitError } from "../core/errors.js";
import { parseIp } from "../core/ip.js";
import { checkArgument, checkOptions, type OptionsShape, required } from "../core/options.js";
import type { ForwardHeaders } from "../http/guard.js";
import { EXPRESS_RATE_LIMIT_OPTIONS, GUARD_OPTIONS, LIMITER } from "../http/guard-options.js";
import type { Verdict } from "../http/respond.js";
import type { Limiter } from "../limiter.js";
import { RateLimitedWarning } from "../warnings.js";
import {
  answerOf,
  describeRequest,
  forwardRequest,
  keepReading,
  type WaitUntilContext,
  type WebGuardOptions,
  webGuard,
  withHeaders,
} from "./web.js";

export {
  describeRequest,
  forwardRequest,
  refusalResponse,
  type WaitUntilContext,
  type WebGuardOptions,
  type WebOnRefused,
  withHeaders,
} from "./web.js";

export interface FetchRateLimitOptions<Context = unknown> extends WebGuardOptions<Context> {
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
}

function fetchShape() {
  return {
    ...GUARD_OPTIONS,
    limiter: required(LIMITER),
    ip: "function",
  } satisfies OptionsShape<FetchRateLimitOptions>;
}

function checkFetchOptions(name: string, options: unknown): void {
  if (typeof EDGELIMIT_BUNDLE === "undefined")
    checkOptions(name, options, fetchShape(), { foreign: EXPRESS_RATE_LIMIT_OPTIONS });
}

/**
 * Wraps a fetch handler (`Deno.serve(handler)`, `Bun.serve({ fetch })`, a Worker's `fetch`):
 * refused requests are answered here; allowed ones reach the handler with the remaining count
 * in a request header, and the client gets the rate-limit headers on the response.
 *
 * A Web `Request` carries no peer address, so a policy that counts clients by it needs `ip`:
 * without it every client would share the one counter `ip:unknown`, and one client would
 * exhaust the limit for all. That is refused here, when the handler is built.
 *
 * `ctx` (the third argument, or the context when it has one): what `waitUntil` the request
 * has, a Worker's `ctx` or a Next.js middleware's `event`. Where requests refresh the limiter's
 * copy of the overrides (a Worker), each read in flight is handed to it, so the runtime does not
 * cut it off with the answer: make this the Worker's `fetch`, or pass `ctx` on.
 */
export function withRateLimit<Context = unknown>(
  handler: (
    request: Request,
    context: Context,
    verdict: Verdict | undefined,
  ) => Response | Promise<Response>,
  options: FetchRateLimitOptions<Context>,
): (request: Request, context: Context, ctx?: WaitUntilContext) => Promise<Response> {
  if (typeof EDGELIMIT_BUNDLE === "undefined")
    checkArgument("withRateLimit", "the handler (first argument)", handler, "function");
  checkFetchOptions("withRateLimit", options);
  const { limiter } = options;
  const source = limiter.policy.identity.ip.source;
  if (options.ip === undefined && readsPeer(limiter)) {
    throw new EdgelimitError(
      "EL_BAD_OPTION",
      `withRateLimit needs the ip option: the policy counts clients by their address (identity.ip.source: ${source}) and a Request does not carry it, so every client would share one counter. Pass the peer address as the runtime reports it, for example Deno: withRateLimit(handler, { limiter, ip: (req, info) => info.remoteAddr.hostname }); Bun: ip: (req, server) => server.requestIP(req)?.address. Behind a platform that sets a client header (Cloudflare's cf-connecting-ip), use identity.ip.source: header instead.`,
    );
  }
  const checkPeer = peerChecker("withRateLimit", limiter);
  const guard = webGuard<Context>("withRateLimit", limiter, options, (request, context) =>
    describeRequest(request, checkPeer(options.ip?.(request, context))),
  );
  return async (request, context, ctx) => {
    let action: Awaited<ReturnType<typeof guard.run>>;
    try {
      action = await guard.run(request, context);
    } finally {
      keepReading(limiter, ctx ?? context);
    }
    if (action.kind !== "forward") return answerOf(action) as Response;
    const response = await handler(forwardRequest(request, action), context, action.verdict);
    return withHeaders(response, action.respond);
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
  /** Hono reads the request from `raw`, which middleware may replace (Hono's body limit does). */
  readonly req: { raw: Request };
  readonly env?: unknown;
  /** A Worker's `ctx` (Hono's getter throws where there is none). */
  readonly executionCtx?: unknown;
  header(name: string, value: string): void;
}

/**
 * Hono middleware: `app.use(honoRateLimit({ limiter }))`. On Node (@hono/node-server) the peer
 * address is read from `c.env.incoming`; elsewhere pass `ip`. Whether the runtime is Node is
 * known only per request, so a missing address is warned about then (see `ip`), not refused.
 */
export function honoRateLimit(options: FetchRateLimitOptions<HonoLikeContext>) {
  checkFetchOptions("honoRateLimit", options);
  const { limiter } = options;
  const checkPeer = peerChecker("honoRateLimit", limiter);
  // Hono's routers match paths case-sensitively (it has no option to do otherwise).
  const guard = webGuard<HonoLikeContext>("honoRateLimit", limiter, options, (request, c) => ({
    ...describeRequest(request, checkPeer(options.ip?.(request, c) ?? nodePeerOf(c.env))),
    caseSensitiveRouting: true,
  }));
  return async (c: HonoLikeContext, next: () => Promise<void>): Promise<Response | undefined> => {
    let action: Awaited<ReturnType<typeof guard.run>>;
    try {
      action = await guard.run(c.req.raw, c);
    } finally {
      keepReading(limiter, executionCtxOf(c));
    }
    if (action.kind !== "forward") return answerOf(action);
    forwardHonoRequest(c, action);
    await next();
    for (const name in action.respond) c.header(name, action.respond[name] as string);
    return undefined;
  };
}

/**
 * Hands the handlers the request as the origin may see it. On Node the request's headers can
 * be changed in place; where they are immutable (workerd, some fetch runtimes) the request is
 * rebuilt with them, as Hono's own body-limit middleware replaces `c.req.raw`.
 */
function forwardHonoRequest(c: HonoLikeContext, forward: ForwardHeaders): void {
  const raw = c.req.raw;
  try {
    raw.headers.delete(forward.remove);
    for (const name in forward.set) raw.headers.set(name, forward.set[name] as string);
    // A runtime that ignores the change instead of refusing it gets a rebuilt request too.
    if (raw.headers.get(forward.remove) === (forward.set[forward.remove] ?? null)) return;
  } catch {
    // Immutable headers: rebuilt below.
  }
  c.req.raw = forwardRequest(raw, forward);
}

function executionCtxOf(c: HonoLikeContext): unknown {
  try {
    return c.executionCtx;
  } catch {
    return undefined; // not a Worker (Hono: "This context has no ExecutionContext")
  }
}

function nodePeerOf(env: unknown): string | undefined {
  const incoming = (env as { incoming?: { socket?: { remoteAddress?: string } } } | undefined)
    ?.incoming;
  return incoming?.socket?.remoteAddress;
}
