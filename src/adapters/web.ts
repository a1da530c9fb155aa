/**
 * The guard's actions in Web-standard terms, shared by the fetch runtimes (`withRateLimit`,
 * `honoRateLimit`) and the Worker: a `Request` read into the core's description, a refusal or
 * the challenge page as a `Response`, the request passed on with the origin's headers.
 */
import type { ChallengeHandler, RequestDescription } from "../core/types.js";
import {
  type ApplicationUser,
  type ForwardHeaders,
  Guard,
  type GuardAction,
  type GuardLimiter,
} from "../http/guard.js";
import type { Verdict } from "../http/respond.js";

/** The guard's options as functions of a Web `Request` and the runtime's context. */
export interface WebGuardOptions<Context> {
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
  readonly user?: (request: Request, context: Context) => ApplicationUser | undefined;
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
 * The guard on Web `Request`s: `describe` reads one (with the peer address as the runtime
 * reports it), the challenge page reads it as it is, and `onRefused`'s answer gets the
 * verdict's headers.
 */
export function webGuard<Context>(
  name: string,
  limiter: GuardLimiter,
  options: WebGuardOptions<Context>,
  describe: (request: Request, context: Context) => RequestDescription,
): Guard<Request, Context, Response> {
  const onRefused = options.onRefused;
  return new Guard(
    name,
    limiter,
    {
      challenge: options.challenge,
      skip: options.skip,
      cost: options.cost,
      user: options.user,
      onRefused:
        onRefused === undefined
          ? undefined
          : async (request, _context, verdict) =>
              withHeaders(await onRefused(request, verdict), verdict.headers),
    },
    { describe, webRequest: (request) => request },
  );
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
