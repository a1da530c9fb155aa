/**
 * The guard's actions in Web-standard terms, shared by the fetch runtimes (`withRateLimit`,
 * `honoRateLimit`) and the Worker: a `Request` read into the core's description, a refusal or
 * the challenge page as a `Response`, the request passed on with the origin's headers, and the
 * overrides' reads kept alive past the answer (`keepReading`).
 */
import type { RequestDescription } from "../core/types.js";
import {
  type ForwardHeaders,
  Guard,
  type GuardAction,
  type GuardLimiter,
  type GuardOptions,
} from "../http/guard.js";
import type { Verdict } from "../http/respond.js";
import type { Limiter } from "../limiter.js";

/**
 * The answer to a refused request instead of `refusalResponse(verdict)` (429 with a JSON body,
 * 302 to the challenge, 503 when failing closed); the verdict's `headers` are added to it,
 * except those it sets itself (its own `content-type` stays).
 */
export type WebOnRefused = (request: Request, verdict: Verdict) => Response | Promise<Response>;

/** Every adapter's options (see `GuardOptions`) as functions of a Web `Request` and a context. */
export type WebGuardOptions<Context> = GuardOptions<
  [request: Request, context: Context],
  WebOnRefused
>;

/** The guard on Web `Request`s, with its runtime's context. */
export type WebGuard<Context> = Guard<Request, Context, WebOnRefused, Response>;

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
 * The request to pass on: the client's copies of our headers dropped and ours set, in a new
 * `Request` (a runtime's incoming request may have immutable headers), or the request itself
 * when there is nothing to change.
 */
export function forwardRequest(request: Request, forward: ForwardHeaders): Request {
  const names = Object.keys(forward.set);
  if (names.length === 0 && !request.headers.has(forward.remove)) return request;
  const headers = new Headers(request.headers);
  headers.delete(forward.remove);
  for (const name of names) headers.set(name, forward.set[name] as string);
  return new Request(request, { headers });
}

/** Adds headers to a response (to a copy when its headers are immutable). */
export function withHeaders(
  response: Response,
  headers: Readonly<Record<string, string>>,
): Response {
  const entries = Object.entries(headers);
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
 * Adds the headers a response does not have yet (to a copy when its headers are immutable):
 * the verdict's headers under `onRefused`'s answer, whose own (its `content-type`, its
 * `retry-after`) win.
 */
function withMissingHeaders(
  response: Response,
  headers: Readonly<Record<string, string>>,
): Response {
  const missing: Record<string, string> = {};
  for (const name in headers) {
    if (!response.headers.has(name)) missing[name] = headers[name] as string;
  }
  return withHeaders(response, missing);
}

/**
 * The guard on Web `Request`s: `describe` reads one (with the peer address as the runtime
 * reports it), the challenge page reads it as it is, and `onRefused`'s answer gets the
 * verdict's headers it did not set itself.
 */
export function webGuard<Context>(
  name: string,
  limiter: GuardLimiter,
  options: WebGuardOptions<Context>,
  describe: (request: Request, context: Context) => RequestDescription,
): WebGuard<Context> {
  return new Guard(name, limiter, options, {
    describe,
    webRequest: (request) => request,
    refused: async (onRefused, request, _context, verdict) =>
      withMissingHeaders(await onRefused(request, verdict), verdict.headers),
  });
}

/**
 * The response for an action that ends here (the challenge page, a refusal), or undefined when
 * the request goes on.
 */
export function answerOf(action: GuardAction<Response>): Response | undefined {
  switch (action.kind) {
    case "page":
      return action.response;
    case "refuse":
      return refusalResponse(action.verdict);
    case "answered":
      return action.answer;
    case "forward":
      return undefined;
  }
}

/** What a Worker's `ctx` (or a Next.js middleware's `event`) offers: work kept after the answer. */
export interface WaitUntilContext {
  waitUntil(work: Promise<unknown>): void;
}

/**
 * Where requests refresh the overrides (a Worker), hands the reads in flight to the request's
 * `waitUntil`, so the runtime does not cut them off with the answer (override-watch.ts). Without
 * one, a read cut off is begun again after two refreshes.
 */
export function keepReading(limiter: Limiter, ctx: unknown): void {
  if (limiter.heldOverrides === undefined) return;
  if (typeof (ctx as Partial<WaitUntilContext> | null | undefined)?.waitUntil !== "function")
    return;
  limiter.overrides.keepAlive(ctx as WaitUntilContext);
}
