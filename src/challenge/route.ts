/**
 * The one place that decides whether a request is for the challenge page, used by every adapter
 * and the gateway: the page's path is matched on the normalised path (so `//captcha/../captcha`
 * is the page too), and the page is served to the client as the limiter sees it.
 */
import { matchesPrefix, normalizePath } from "../core/path.js";
import type { ChallengeClient, ChallengeHandler, RequestDescription } from "../core/types.js";

/** What the router needs of a limiter: the client as its decisions see it. */
export interface ClientResolver {
  clientOf(request: RequestDescription): Promise<ChallengeClient>;
}

/**
 * The challenge page's answer when `description` asks for it, or undefined when the request is
 * for anything else (then it goes to the limiter). `toRequest` builds the Web `Request` the
 * handler reads, only when it is needed.
 */
export function routeChallenge(
  challenge: ChallengeHandler | undefined,
  limiter: ClientResolver,
  description: RequestDescription,
  toRequest: () => Request,
): Promise<Response> | undefined {
  if (challenge === undefined) return undefined;
  if (!matchesPrefix(normalizePath(description.path), challenge.path)) return undefined;
  return limiter.clientOf(description).then((client) => challenge.handle(toRequest(), client));
}
